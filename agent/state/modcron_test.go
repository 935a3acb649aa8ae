package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// Cases from Salt's tests/unit/states/test_cron.py (test_present,
// test_remove, test_multiline_comments_are_updated) and the tab layout of
// salt/modules/cron.py _render_tab.
func TestCron(t *testing.T) {
	dir := t.TempDir()
	old := cronTabDir
	cronTabDir = dir
	t.Cleanup(func() { cronTabDir = old })
	os.WriteFile(filepath.Join(dir, "root"), []byte("MAILTO=me\n1 2 3 4 5 /usr/bin/mine\n"), 0o600)
	h := newSysHost(t)
	read := func() string { b, _ := os.ReadFile(filepath.Join(dir, "root")); return string(b) }
	before := read()

	r := sysCall(t, h, "cron.present", "/usr/bin/foo", true, map[string]any{"minute": 5})
	sysWant(t, "test", r, state.None, "Cron /usr/bin/foo is set to be added")
	if read() != before {
		t.Fatal("test=True wrote the crontab")
	}
	r = sysCall(t, h, "cron.present", "/usr/bin/foo", false, map[string]any{"minute": 5, "comment": "hi"})
	sysWant(t, "add", r, state.True, "Cron /usr/bin/foo added to root's crontab")
	if r.Changes["root"] != "/usr/bin/foo" {
		t.Fatalf("changes %v", r.Changes)
	}
	want := "MAILTO=me\n1 2 3 4 5 /usr/bin/mine\n" + cronTag + "\n# hi SALT_CRON_IDENTIFIER:/usr/bin/foo\n5 * * * * /usr/bin/foo\n"
	if got := read(); got != want {
		t.Fatalf("crontab:\n%s\nwant:\n%s", got, want)
	}
	r = sysCall(t, h, "cron.present", "/usr/bin/foo", false, map[string]any{"minute": "5", "comment": "hi"})
	sysWant(t, "again", r, state.True, "Cron /usr/bin/foo already present")
	r = sysCall(t, h, "cron.present", "/usr/bin/foo", true, map[string]any{"minute": "6"})
	sysWant(t, "update test", r, state.None, "Cron /usr/bin/foo is set to be updated")
	r = sysCall(t, h, "cron.present", "/usr/bin/foo", false, map[string]any{"minute": "6"})
	sysWant(t, "update", r, state.True, "Cron /usr/bin/foo updated")
	if !strings.Contains(read(), "# hi SALT_CRON_IDENTIFIER:/usr/bin/foo\n6 * * * * /usr/bin/foo\n") {
		t.Fatalf("update kept the comment? %s", read())
	}
	r = sysCall(t, h, "cron.present", "/bin/boot", false, map[string]any{"special": "@reboot", "identifier": "boot"})
	sysWant(t, "special", r, state.True, "Cron /bin/boot added to root's crontab")
	if !strings.HasSuffix(read(), "# SALT_CRON_IDENTIFIER:boot\n@reboot /bin/boot\n") {
		t.Fatalf("special: %s", read())
	}
	r = sysCall(t, h, "cron.absent", "/usr/bin/foo", true, nil)
	sysWant(t, "absent test", r, state.None, "Cron /usr/bin/foo is set to be removed")
	r = sysCall(t, h, "cron.absent", "/usr/bin/foo", false, nil)
	sysWant(t, "absent", r, state.True, "Cron /usr/bin/foo removed from root's crontab")
	r = sysCall(t, h, "cron.absent", "/usr/bin/foo", false, nil)
	sysWant(t, "absent again", r, state.True, "Cron /usr/bin/foo already absent")
	if strings.Contains(read(), "/usr/bin/foo") || !strings.Contains(read(), "1 2 3 4 5 /usr/bin/mine") {
		t.Fatalf("after absent: %s", read())
	}
	for _, kw := range []map[string]any{{"user": "-r"}, {"minute": "1 * * * * evil"}, {"identifier": "a\n* * * * * evil"}} {
		r = sysCall(t, h, "cron.present", "/bin/x", false, kw)
		if r.Result != state.False || strings.Contains(read(), "evil") {
			t.Fatalf("hostile %v accepted: %q", kw, r.Comment)
		}
	}
	r = sysCall(t, h, "cron.present", "/bin/x\n* * * * * evil", false, nil)
	sysWant(t, "newline", r, state.False, "Invalid cron job: the command must be one non-empty line")
}
