package agent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/protocol"
)

func openTestSpool(t *testing.T, dir string, max int64, keep func(spoolItem) bool) *spool {
	t.Helper()
	s, err := openSpool(dir, max, keep)
	if err != nil {
		t.Fatalf("openSpool: %v", err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

func mustPush(t *testing.T, s *spool, kind protocol.Type, body string) (uint64, int) {
	t.Helper()
	seq, dropped, err := s.push(kind, []byte(body))
	if err != nil {
		t.Fatalf("push %q: %v", body, err)
	}
	return seq, dropped
}

// waiting lists the bodies that wait, oldest first, as the writer sees them.
func waiting(s *spool) []string {
	var out []string
	for seq := uint64(0); ; {
		it, ok := s.after(seq)
		if !ok {
			return out
		}
		out = append(out, fmt.Sprintf("%d:%s:%s", it.seq, it.kind, it.body))
		seq = it.seq
	}
}

func TestSpoolOrderAndAck(t *testing.T) {
	s := openTestSpool(t, t.TempDir(), 1<<20, nil)
	for i, body := range []string{"r1", "e2", "r3", "e4"} {
		kind := protocol.TypeReturn
		if body[0] == 'e' {
			kind = protocol.TypeEvent
		}
		if seq, _ := mustPush(t, s, kind, body); seq != uint64(i+1) {
			t.Errorf("push %s: got seq %d, want %d", body, seq, i+1)
		}
	}
	steps := []struct {
		name string
		ack  uint64
		want []string
	}{
		{"nothing acked", 0, []string{"1:return:r1", "2:event:e2", "3:return:r3", "4:event:e4"}},
		{"ack 2", 2, []string{"3:return:r3", "4:event:e4"}},
		{"stale ack", 1, []string{"3:return:r3", "4:event:e4"}},
		{"ack all", 4, nil},
	}
	for _, st := range steps {
		if err := s.ack(st.ack); err != nil {
			t.Fatalf("%s: ack: %v", st.name, err)
		}
		if d := cmp.Diff(st.want, waiting(s)); d != "" {
			t.Errorf("%s: waiting (-want +got):\n%s", st.name, d)
		}
	}
	if s.bytes != 0 || s.len() != 0 {
		t.Errorf("after acking all: got %d items, %d bytes, want none", s.len(), s.bytes)
	}
}

func TestSpoolBound(t *testing.T) {
	s := openTestSpool(t, t.TempDir(), 10, nil)
	steps := []struct {
		body    string
		dropped int
		want    []string
	}{
		{"aaaa", 0, []string{"1:event:aaaa"}},
		{"bbbb", 0, []string{"1:event:aaaa", "2:event:bbbb"}},
		{"cc", 0, []string{"1:event:aaaa", "2:event:bbbb", "3:event:cc"}},
		{"d", 1, []string{"2:event:bbbb", "3:event:cc", "4:event:d"}},
		// Larger than the bound alone: kept, everything older dropped.
		{"eeeeeeeeeeee", 3, []string{"5:event:eeeeeeeeeeee"}},
		{"f", 1, []string{"6:event:f"}},
	}
	for _, st := range steps {
		_, dropped := mustPush(t, s, protocol.TypeEvent, st.body)
		if dropped != st.dropped {
			t.Errorf("push %s: got %d dropped, want %d", st.body, dropped, st.dropped)
		}
		if d := cmp.Diff(st.want, waiting(s)); d != "" {
			t.Errorf("after push %s: waiting (-want +got):\n%s", st.body, d)
		}
	}
}

// TestSpoolRestart: what waits survives a close (or a crash: nothing is
// closed before reopening), acks and drops too, the sequence goes on, and
// a torn last record is dropped.
func TestSpoolRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"one", "two", "three", "four"} {
		mustPush(t, s, protocol.TypeReturn, b)
	}
	mustPush(t, s, protocol.TypeEvent, "five") // drops "one"
	if err := s.ack(2); err != nil {
		t.Fatal(err)
	}
	want := []string{"3:return:three", "4:return:four", "5:event:five"}
	if d := cmp.Diff(want, waiting(s)); d != "" {
		t.Fatalf("before restart: waiting (-want +got):\n%s", d)
	}
	// Not closed: as after a crash.
	s2 := openTestSpool(t, dir, 16, nil)
	if d := cmp.Diff(want, waiting(s2)); d != "" {
		t.Errorf("after restart: waiting (-want +got):\n%s", d)
	}
	s.close()
	if seq, _ := mustPush(t, s2, protocol.TypeEvent, "six"); seq != 6 {
		t.Errorf("first push after restart: got seq %d, want 6", seq)
	}
	if err := s2.ack(6); err != nil {
		t.Fatal(err)
	}
	s2.close()

	// Everything acked: the sequence still goes on after a restart.
	s3 := openTestSpool(t, dir, 16, nil)
	if n := s3.len(); n != 0 {
		t.Errorf("after acking all and reopening: got %d items, want 0", n)
	}
	if seq, _ := mustPush(t, s3, protocol.TypeReturn, "seven"); seq != 7 {
		t.Errorf("push after reopening an empty spool: got seq %d, want 7", seq)
	}
	mustPush(t, s3, protocol.TypeReturn, "eight")
	s3.close()

	// A crash in the middle of the last write.
	path := filepath.Join(dir, spoolFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	s4 := openTestSpool(t, dir, 16, nil)
	if d := cmp.Diff([]string{"7:return:seven"}, waiting(s4)); d != "" {
		t.Errorf("after a torn write: waiting (-want +got):\n%s", d)
	}
	if seq, _ := mustPush(t, s4, protocol.TypeReturn, "again"); seq != 8 {
		t.Errorf("push after a torn write: got seq %d, want 8", seq)
	}
}

func TestSpoolKeepAndCompact(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 64<<10)
	const n = 40 // 2.5 MiB of items: acking them compacts the log
	for range n {
		if _, _, err := s.push(protocol.TypeReturn, big); err != nil {
			t.Fatal(err)
		}
	}
	mustPush(t, s, protocol.TypeEvent, "mine")
	mustPush(t, s, protocol.TypeEvent, "theirs")
	if err := s.ack(n); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, spoolFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1024 {
		t.Errorf("log after acking %d large items: got %d bytes, want it compacted", n, fi.Size())
	}
	s.close()
	s2 := openTestSpool(t, dir, 1<<30, func(it spoolItem) bool { return string(it.body) != "theirs" })
	if d := cmp.Diff([]string{fmt.Sprintf("%d:event:mine", n+1)}, waiting(s2)); d != "" {
		t.Errorf("after reopening with a filter: waiting (-want +got):\n%s", d)
	}
}

func TestMadeBy(t *testing.T) {
	ret, err := protocol.Marshal(&protocol.ReturnBody{ID: "dev1", JID: "20261122120000000001", Fun: "test.ping"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := protocol.Marshal(&protocol.EventBody{ID: "dev1", Tag: "a/b", Data: map[string]any{"id": "dev2"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
		id   string
		want bool
	}{
		{"return, same id", ret, "dev1", true},
		{"event, same id", ev, "dev1", true},
		{"return, other id", ret, "dev2", false},
		{"event, id a prefix", ev, "dev", false},
		{"event, longer id", ev, "dev10", false},
		{"empty", nil, "dev1", false},
	} {
		if got := madeBy(tc.body, tc.id); got != tc.want {
			t.Errorf("%s: madeBy(%q): got %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}
