package state

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// Cases from Salt's tests/pytests/unit/states/test_user.py,
// tests/pytests/functional/states/test_user.py and
// tests/pytests/unit/states/test_group.py.
func TestUserGroup(t *testing.T) {
	if os.Getuid() != 0 || sysLookPath("useradd") == "" {
		t.Skip("needs root and useradd")
	}
	n := rand.Uint32() % 1000000
	user, grp := fmt.Sprintf("hlt-u%d", n), fmt.Sprintf("hlt-g%d", n)
	home := t.TempDir() + "/home"
	t.Cleanup(func() {
		exec.Command("userdel", "-r", user).Run()
		exec.Command("groupdel", grp).Run()
	})
	h := newSysHost(t)
	passwd := func() string { b, _ := os.ReadFile("/etc/passwd"); return string(b) }

	r := sysCall(t, h, "group.present", grp, true, nil)
	sysWant(t, "group test", r, state.None, "Group "+grp+" set to be added")
	r = sysCall(t, h, "group.present", grp, false, nil)
	sysWant(t, "group", r, state.True, "New group "+grp+" created")
	r = sysCall(t, h, "group.present", grp, false, nil)
	sysWant(t, "group again", r, state.True, "Group "+grp+" is present and up to date")

	r = sysCall(t, h, "user.present", user, true, map[string]any{"home": home})
	sysWant(t, "user test", r, state.None, "User "+user+" set to be added")
	if strings.Contains(passwd(), user+":") {
		t.Fatal("test=True added the user")
	}
	kw := map[string]any{"home": home, "shell": "/bin/sh", "fullname": "Halite Test", "groups": []any{grp},
		"password": "$6$salt$hash"}
	r = sysCall(t, h, "user.present", user, false, kw)
	sysWant(t, "user", r, state.True, "New user "+user+" created")
	if r.Changes["home"] != home || r.Changes["shell"] != "/bin/sh" || r.Changes["passwd"] != "XXX-REDACTED-XXX" {
		t.Fatalf("changes %v", r.Changes)
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		t.Fatal("no home made")
	}
	r = sysCall(t, h, "user.present", user, false, kw)
	sysWant(t, "user again", r, state.True, "User "+user+" is present and up to date")

	kw["shell"] = "/bin/bash"
	r = sysCall(t, h, "user.present", user, true, kw)
	sysWant(t, "change test", r, state.None, "The following user attributes are set to be changed:\nshell: /bin/bash\n")
	r = sysCall(t, h, "user.present", user, false, kw)
	sysWant(t, "change", r, state.True, "Updated user "+user)
	if r.Changes["shell"] != "/bin/bash" || len(r.Changes) != 1 {
		t.Fatalf("changes %v", r.Changes)
	}

	r = sysCall(t, h, "group.present", grp, false, map[string]any{"members": []any{}})
	sysWant(t, "members", r, state.True, "")
	if r.Changes["Final"] != "All changes applied successfully" {
		t.Fatalf("members changes %v %q", r.Changes, r.Comment)
	}
	r = sysCall(t, h, "group.present", grp, false, map[string]any{"addusers": []any{user}})
	if r.Changes["Final"] == nil {
		t.Fatalf("addusers %v %q", r.Changes, r.Comment)
	}

	r = sysCall(t, h, "user.absent", user, true, nil)
	sysWant(t, "absent test", r, state.None, "User "+user+" set for removal")
	r = sysCall(t, h, "user.absent", user, false, map[string]any{"purge": true})
	sysWant(t, "absent", r, state.True, "Removed user "+user)
	if r.Changes[user] != "removed" || strings.Contains(passwd(), user+":") {
		t.Fatalf("absent: %v", r.Changes)
	}
	r = sysCall(t, h, "user.absent", user, false, nil)
	sysWant(t, "absent again", r, state.True, "User "+user+" is not present")

	for _, bad := range []string{"-o", "a b", "a:b", "a\nb"} {
		r = sysCall(t, h, "user.present", bad, false, nil)
		if r.Result != state.False || !strings.HasPrefix(r.Comment, "Invalid user name") {
			t.Fatalf("hostile %q: %q", bad, r.Comment)
		}
	}
	r = sysCall(t, h, "user.present", "x"+user, false, map[string]any{"groups": []any{"nosuchgroup-hlt"}})
	sysWant(t, "missing group", r, state.False, "The following group(s) are not present: nosuchgroup-hlt")
	r = sysCall(t, h, "user.present", "x"+user, false, map[string]any{"fullname": "a,b"})
	sysWant(t, "comma", r, state.False, "Unsupported char ',' in fullname")
}
