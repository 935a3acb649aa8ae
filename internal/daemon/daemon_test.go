package daemon

import (
	"strings"
	"testing"
)

// TestMayBecome: as Salt's check_user (salt/utils/verify.py), running as
// the user already is nothing and root may become anyone; anyone else is
// refused with a message naming who it runs as.
func TestMayBecome(t *testing.T) {
	for _, c := range []struct {
		name      string
		uid, euid int
		wantErr   string
	}{
		{"same user", 1000, 1000, ""},
		{"root", 65534, 0, ""},
		{"not root", 65534, 1000, "-u nobody: only root can run as another user (running as "},
		{"not root to root", 0, 1000, "only root can run as another user"},
	} {
		err := mayBecome("nobody", c.uid, c.euid)
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("%s: got %v, want no error", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.wantErr)
		}
	}
}

// TestNotChild: Ready outside a detached child does nothing.
func TestNotChild(t *testing.T) {
	t.Setenv(childEnv, "")
	if IsChild() {
		t.Fatal("IsChild: got true, want false")
	}
	if err := Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}
