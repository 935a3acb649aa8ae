package yamlbound

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// bomb is the classic nested alias bomb: each level lists the previous
// one nine times, so levels levels expand to 9^levels scalars.
func bomb(levels int) string {
	var b strings.Builder
	b.WriteString("a00: &a00 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 1; i <= levels; i++ {
		p := "*a" + itoa(i-1)
		b.WriteString("a" + itoa(i) + ": &a" + itoa(i) + " [" + strings.Repeat(p+",", 8) + p + "]\n")
	}
	return b.String()
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

func TestCheck(t *testing.T) {
	big := strings.Repeat("x", 100_000)
	tests := []struct {
		name     string
		doc      string
		wantLine int // 0: no error
	}{
		{"no aliases", "a: 1\nb: [1, 2]\n", 0},
		{"defaults reused", "d: &d {x: 1, y: 2, z: [1, 2, 3]}\n" + strings.Repeat("- *d\n", 0) + "l: [*d, *d, *d, *d]\nm:\n  <<: *d\n  x: 3\n", 0},
		{"bomb of 4 levels (59k nodes) is fine", bomb(4), 0},
		{"bomb of 5 levels", bomb(5), 6},
		{"bomb of 9 levels", bomb(9), 6},
		{"big scalar repeated", "s: &s " + big + "\nl: [" + strings.Repeat("*s, ", 60) + "*s]\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte(tt.doc), &n); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err := Check(&n)
			if d := time.Since(start); d > time.Second {
				t.Errorf("Check took %v, want well under a second", d)
			}
			var be *Error
			switch {
			case tt.wantLine == 0 && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantLine != 0 && !errors.As(err, &be):
				t.Errorf("got %v, want an *Error", err)
			case tt.wantLine != 0 && be.Line != tt.wantLine:
				t.Errorf("got line %d (%v), want line %d", be.Line, err, tt.wantLine)
			}
		})
	}
}

func TestCheckSelfAlias(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("a: &a [1, *a]\n"), &n); err != nil {
		t.Skipf("the parser refuses it itself: %v", err)
	}
	if err := Check(&n); err == nil {
		t.Errorf("got no error for an alias inside its own anchor, want one")
	}
}

func TestUnmarshal(t *testing.T) {
	var v any
	if err := Unmarshal([]byte(bomb(9)), &v); err == nil {
		t.Errorf("Unmarshal of a bomb: got no error, want one")
	}
	v = nil
	if err := Unmarshal([]byte("[1, {a: b}]"), &v); err != nil {
		t.Fatal(err)
	}
	if l, ok := v.([]any); !ok || len(l) != 2 {
		t.Errorf("got %#v, want a list of 2", v)
	}
	v = "kept"
	if err := Unmarshal(nil, &v); err != nil || v != "kept" {
		t.Errorf("empty document: got %v, %v; want kept, nil", v, err)
	}
}
