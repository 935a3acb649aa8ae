package state

// The user and group state modules, after Salt 3006's salt/states/user.py
// (present, absent) and salt/states/group.py (present) over
// salt/modules/useradd.py and groupadd.py: useradd/usermod/userdel and
// groupadd/groupmod/gpasswd where present, BusyBox's adduser/deluser/
// addgroup/delgroup and chpasswd -e otherwise. Accounts are read from
// /etc/passwd, /etc/group and /etc/shadow.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/halite-fleet/halite/state"
)

// The account files, variables for tests.
var (
	userPasswdFile = "/etc/passwd"
	userGroupFile  = "/etc/group"
	userShadowFile = "/etc/shadow"
)

func init() {
	Register("user.present", Mod{Run: userPresent, Doc: `Ensure that the named user is present with the specified properties.

    uid, gid (number or group name), home, createhome (default True), shell,
    groups (list; remove_groups: True drops others), fullname,
    password (a crypt hash, as Salt: hash_password is not supported),
    enforce_password (default True), system`})
	Register("user.absent", Mod{Run: userAbsent, Doc: "Ensure that the named user is absent (purge: remove the home directory, force)."})
	Register("group.present", Mod{Run: groupPresent, Doc: "Ensure that a group is present (gid, system, members, addusers, delusers)."})
}

type userEnt struct {
	name, passwd, fullname, room, work, homePhone, other, home, shell string
	uid, gid                                                          int
}

type groupEnt struct {
	name    string
	gid     int
	members []string
}

func userReadPasswd() (map[string]*userEnt, error) {
	b, err := os.ReadFile(userPasswdFile)
	if err != nil {
		return nil, err
	}
	out := map[string]*userEnt{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 7 {
			continue
		}
		uid, _ := strconv.Atoi(f[2])
		gid, _ := strconv.Atoi(f[3])
		gecos := append(strings.Split(f[4], ","), "", "", "", "", "")
		out[f[0]] = &userEnt{name: f[0], passwd: f[1], uid: uid, gid: gid, fullname: gecos[0], room: gecos[1],
			work: gecos[2], homePhone: gecos[3], other: gecos[4], home: f[5], shell: f[6]}
	}
	return out, nil
}

func userReadGroups() ([]*groupEnt, error) {
	b, err := os.ReadFile(userGroupFile)
	if err != nil {
		return nil, err
	}
	var out []*groupEnt
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 4 {
			continue
		}
		gid, _ := strconv.Atoi(f[2])
		g := &groupEnt{name: f[0], gid: gid}
		for _, m := range strings.Split(f[3], ",") {
			if m != "" {
				g.members = append(g.members, m)
			}
		}
		out = append(out, g)
	}
	return out, nil
}

func userShadowHash(name string) string {
	b, err := os.ReadFile(userShadowFile)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Split(line, ":"); len(f) > 1 && f[0] == name {
			return f[1]
		}
	}
	return ""
}

// userGroupsOf is salt.utils.user.get_group_list: every group the user is
// in, the primary one included, sorted.
func userGroupsOf(u *userEnt, groups []*groupEnt) []string {
	set := map[string]bool{}
	for _, g := range groups {
		if g.gid == u.gid {
			set[g.name] = true
		}
		for _, m := range g.members {
			if m == u.name {
				set[g.name] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// userInfo is user.info: nil when the user does not exist.
func userInfo(name string) (map[string]any, *userEnt, []string, error) {
	users, err := userReadPasswd()
	if err != nil {
		return nil, nil, nil, err
	}
	u := users[name]
	if u == nil {
		return nil, nil, nil, nil
	}
	groups, err := userReadGroups()
	if err != nil {
		return nil, nil, nil, err
	}
	gl := userGroupsOf(u, groups)
	ga := make([]any, len(gl))
	for i, g := range gl {
		ga[i] = g
	}
	return map[string]any{"name": u.name, "passwd": u.passwd, "uid": u.uid, "gid": u.gid, "fullname": u.fullname,
		"roomnumber": u.room, "workphone": u.work, "homephone": u.homePhone, "other": u.other,
		"home": u.home, "shell": u.shell, "groups": ga}, u, gl, nil
}

func userGid(groups []*groupEnt, v string) (int, bool) {
	if n, err := strconv.Atoi(v); err == nil {
		return n, true
	}
	for _, g := range groups {
		if g.name == v {
			return g.gid, true
		}
	}
	return 0, false
}

func userBad(kind, s string) string { return sysBadName(kind, s, ":,/\\") }

func userField(kind, s string) string {
	if strings.ContainsAny(s, ":\n\r\x00") || strings.HasPrefix(s, "-") {
		return fmt.Sprintf("Unsupported characters in %s %q", kind, s)
	}
	return ""
}

// userWant is what user.present declares.
type userWant struct {
	uid, gid                *int
	gidName                 string
	home, shell, fullname   *string
	groups                  []string
	hasGroups, removeGroups bool
	createhome, system      bool
	password                string
	enforcePassword         bool
}

func userReadWant(c *Call) (*userWant, string) {
	k := sysKw(c.Chunk)
	w := &userWant{createhome: k.boolean("createhome", true), removeGroups: k.boolean("remove_groups", true),
		enforcePassword: k.boolean("enforce_password", true), system: k.boolean("system", false)}
	if k.boolean("hash_password", false) {
		return nil, "hash_password is not supported by halite-agent: give password as a crypt hash"
	}
	if n, ok, err := k.integer("uid"); err != nil {
		return nil, err.Error()
	} else if ok {
		w.uid = &n
	}
	if s, ok, err := k.str("gid"); err != nil {
		return nil, err.Error()
	} else if ok {
		if b := userBad("group", s); b != "" {
			return nil, b
		}
		w.gidName = s
	}
	for _, f := range []struct {
		key string
		dst **string
	}{{"home", &w.home}, {"shell", &w.shell}, {"fullname", &w.fullname}} {
		s, ok, err := k.str(f.key)
		if err != nil {
			return nil, err.Error()
		}
		if !ok {
			continue
		}
		if b := userField(f.key, s); b != "" {
			return nil, b
		}
		if f.key == "fullname" && strings.Contains(s, ",") {
			return nil, "Unsupported char ',' in fullname"
		}
		s2 := s
		*f.dst = &s2
	}
	if l, ok, err := k.list("groups", true); err != nil {
		return nil, err.Error()
	} else if ok {
		for _, g := range l {
			if b := userBad("group", g); b != "" {
				return nil, b
			}
		}
		w.groups, w.hasGroups = l, true
	}
	if s, ok, err := k.str("password"); err != nil {
		return nil, err.Error()
	} else if ok {
		if b := userField("password", s); b != "" {
			return nil, "Unsupported characters in password"
		}
		w.password = s
	}
	return w, ""
}

// changes is user._changes: what differs, by Salt's keys.
func (w *userWant) changes(name string, u *userEnt, cur []string, groups []*groupEnt) map[string]any {
	ch := map[string]any{}
	if w.uid != nil && *w.uid != u.uid {
		ch["uid"] = *w.uid
	}
	if w.gid != nil && *w.gid != u.gid {
		ch["gid"] = *w.gid
	}
	if w.hasGroups {
		prim := ""
		for _, g := range groups {
			if g.gid == u.gid {
				prim = g.name
			}
		}
		want := map[string]bool{}
		for _, g := range w.groups {
			want[g] = true
		}
		have := map[string]bool{}
		for _, g := range cur {
			if g != prim {
				have[g] = true
			}
		}
		differ := false
		for g := range want {
			if !have[g] && g != prim {
				differ = true
			}
		}
		if w.removeGroups {
			for g := range have {
				if !want[g] {
					differ = true
				}
			}
		}
		if differ {
			l := append([]string(nil), w.groups...)
			sort.Strings(l)
			ch["groups"] = l
		}
	}
	if w.home != nil && *w.home != u.home {
		ch["home"] = *w.home
	}
	if w.createhome {
		home := u.home
		if w.home != nil {
			home = *w.home
		}
		if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
			ch["homeDoesNotExist"] = home
		}
	}
	if w.shell != nil && *w.shell != u.shell {
		ch["shell"] = *w.shell
	}
	if w.fullname != nil && *w.fullname != u.fullname {
		ch["fullname"] = *w.fullname
	}
	if w.password != "" && w.enforcePassword && userShadowHash(name) != w.password {
		ch["passwd"] = w.password
	}
	return ch
}

// userSetPassword is shadow.set_password with a hash.
func userSetPassword(ctx context.Context, name, hash string) error {
	if p := sysLookPath("usermod"); p != "" {
		return pkgCheck(sysRun(ctx, "", nil, p, "-p", hash, name))
	}
	if p := sysLookPath("chpasswd"); p != "" {
		return pkgCheck(sysRun(ctx, name+":"+hash+"\n", nil, p, "-e"))
	}
	return fmt.Errorf("neither usermod nor chpasswd is installed")
}

// userPresent is Salt's user.present.
func userPresent(ctx context.Context, c *Call) state.Ret {
	name := c.Name
	if b := userBad("user", name); b != "" {
		return sysFail(name, "%s", b)
	}
	w, bad := userReadWant(c)
	if bad != "" {
		return sysFail(name, "%s", bad)
	}
	groups, err := userReadGroups()
	if err != nil {
		return sysFail(name, "%v", err)
	}
	if w.gidName != "" {
		n, ok := userGid(groups, w.gidName)
		if !ok {
			return sysFail(name, "The following group(s) are not present: %s", w.gidName)
		}
		w.gid = &n
	}
	var missing []string
	for _, g := range w.groups {
		if _, ok := userGid(groups, g); !ok {
			missing = append(missing, g)
		}
	}
	if len(missing) > 0 {
		return sysFail(name, "The following group(s) are not present: %s", strings.Join(missing, ","))
	}
	pre, u, cur, err := userInfo(name)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}, Comment: fmt.Sprintf("User %s is present and up to date", name)}
	if u != nil {
		ch := w.changes(name, u, cur, groups)
		if len(ch) == 0 {
			return ret
		}
		if c.Test {
			ret.Result = state.None
			var b strings.Builder
			b.WriteString("The following user attributes are set to be changed:\n")
			keys := make([]string, 0, len(ch))
			for k := range ch {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				v := ch[k]
				if k == "passwd" {
					v = "XXX-REDACTED-XXX"
				}
				fmt.Fprintf(&b, "%s: %v\n", k, v)
			}
			ret.Comment = b.String()
			return ret
		}
		preHash := userShadowHash(name)
		if err := userApply(ctx, name, w, ch); err != nil {
			return sysFail(name, "%v", err)
		}
		post, u2, cur2, err := userInfo(name)
		if err != nil || u2 == nil {
			return sysFail(name, "User %s vanished while it was changed", name)
		}
		for k, v := range post {
			if fmt.Sprint(pre[k]) != fmt.Sprint(v) {
				ret.Changes[k] = v
			}
		}
		if _, ok := ch["passwd"]; ok && userShadowHash(name) != preHash {
			ret.Changes["passwd"] = "XXX-REDACTED-XXX"
		}
		if len(ret.Changes) > 0 {
			ret.Comment = fmt.Sprintf("Updated user %s", name)
		}
		groups2, _ := userReadGroups()
		if left := w.changes(name, u2, cur2, groups2); len(left) > 0 {
			if _, ok := left["passwd"]; ok {
				left["passwd"] = "XXX-REDACTED-XXX"
			}
			ret.Result = state.False
			ret.Comment = fmt.Sprintf("These values could not be changed: %v", left)
		}
		return ret
	}
	if c.Test {
		ret.Result = state.None
		ret.Comment = fmt.Sprintf("User %s set to be added", name)
		return ret
	}
	if err := userAdd(ctx, name, w); err != nil {
		return sysFail(name, "Failed to create new user %s: %v", name, err)
	}
	info, _, _, err := userInfo(name)
	if err != nil || info == nil {
		return sysFail(name, "Failed to create new user %s", name)
	}
	ret.Comment = fmt.Sprintf("New user %s created", name)
	ret.Changes = info
	if !w.createhome {
		ret.Changes["home"] = ""
	}
	if w.password != "" {
		if err := userSetPassword(ctx, name, w.password); err != nil {
			ret.Comment = fmt.Sprintf("User %s created but failed to set password to XXX-REDACTED-XXX", name)
			ret.Result = state.False
		}
		ret.Changes["passwd"] = "XXX-REDACTED-XXX"
	}
	return ret
}

// userAdd is useradd.add, or BusyBox adduser.
func userAdd(ctx context.Context, name string, w *userWant) error {
	if p := sysLookPath("useradd"); p != "" {
		argv := []string{p}
		if w.uid != nil {
			argv = append(argv, "-u", strconv.Itoa(*w.uid))
		}
		if w.gid != nil {
			argv = append(argv, "-g", strconv.Itoa(*w.gid))
		}
		if w.home != nil {
			argv = append(argv, "-d", *w.home)
		}
		if w.createhome {
			argv = append(argv, "-m")
		} else {
			argv = append(argv, "-M")
		}
		if w.shell != nil {
			argv = append(argv, "-s", *w.shell)
		}
		if w.fullname != nil {
			argv = append(argv, "-c", *w.fullname)
		}
		if len(w.groups) > 0 {
			argv = append(argv, "-G", strings.Join(w.groups, ","))
		}
		if w.system {
			argv = append(argv, "-r")
		}
		return pkgCheck(sysRun(ctx, "", nil, append(argv, name)...))
	}
	p := sysLookPath("adduser")
	if p == "" {
		return fmt.Errorf("neither useradd nor adduser is installed")
	}
	argv := []string{p, "-D"}
	if w.uid != nil {
		argv = append(argv, "-u", strconv.Itoa(*w.uid))
	}
	if w.home != nil {
		argv = append(argv, "-h", *w.home)
	}
	if !w.createhome {
		argv = append(argv, "-H")
	}
	if w.shell != nil {
		argv = append(argv, "-s", *w.shell)
	}
	if w.fullname != nil {
		argv = append(argv, "-g", *w.fullname)
	}
	if w.system {
		argv = append(argv, "-S")
	}
	if w.gidName != "" {
		argv = append(argv, "-G", w.gidName)
	}
	if err := pkgCheck(sysRun(ctx, "", nil, append(argv, name)...)); err != nil {
		return err
	}
	for _, g := range w.groups {
		if err := groupAddUser(ctx, g, name); err != nil {
			return err
		}
	}
	return nil
}

// userApply makes the changes ch with usermod (or BusyBox's tools).
func userApply(ctx context.Context, name string, w *userWant, ch map[string]any) error {
	if h, ok := ch["passwd"].(string); ok {
		if err := userSetPassword(ctx, name, h); err != nil {
			return err
		}
	}
	um := sysLookPath("usermod")
	argv := []string{um}
	if v, ok := ch["uid"]; ok {
		argv = append(argv, "-u", fmt.Sprint(v))
	}
	if v, ok := ch["gid"]; ok {
		argv = append(argv, "-g", fmt.Sprint(v))
	}
	if v, ok := ch["home"]; ok {
		argv = append(argv, "-d", fmt.Sprint(v))
	}
	if v, ok := ch["shell"]; ok {
		argv = append(argv, "-s", fmt.Sprint(v))
	}
	if v, ok := ch["fullname"]; ok {
		argv = append(argv, "-c", fmt.Sprint(v))
	}
	if len(argv) > 1 {
		if um == "" {
			return fmt.Errorf("usermod is not installed: cannot change %s", name)
		}
		if err := pkgCheck(sysRun(ctx, "", nil, append(argv, name)...)); err != nil {
			return err
		}
	}
	if home, ok := ch["homeDoesNotExist"].(string); ok {
		_, u, _, _ := userInfo(name)
		if err := os.MkdirAll(home, 0o755); err != nil {
			return err
		}
		if u != nil {
			os.Chown(home, u.uid, u.gid)
		}
	}
	if _, ok := ch["groups"]; ok {
		if um != "" {
			flag := []string{"-G", strings.Join(w.groups, ",")}
			if !w.removeGroups {
				flag = []string{"-a", "-G", strings.Join(w.groups, ",")}
			}
			return pkgCheck(sysRun(ctx, "", nil, append(append([]string{um}, flag...), name)...))
		}
		for _, g := range w.groups {
			if err := groupAddUser(ctx, g, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// userAbsent is Salt's user.absent.
func userAbsent(ctx context.Context, c *Call) state.Ret {
	name := c.Name
	if b := userBad("user", name); b != "" {
		return sysFail(name, "%s", b)
	}
	k := sysKw(c.Chunk)
	info, u, before, err := userInfo(name)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	if info == nil {
		return state.Ret{Name: name, Result: state.True, Comment: fmt.Sprintf("User %s is not present", name)}
	}
	_ = u
	if c.Test {
		return state.Ret{Name: name, Result: state.None, Comment: fmt.Sprintf("User %s set for removal", name)}
	}
	var argv []string
	if p := sysLookPath("userdel"); p != "" {
		argv = []string{p}
		if k.boolean("purge", false) {
			argv = append(argv, "-r")
		}
		if k.boolean("force", false) {
			argv = append(argv, "-f")
		}
	} else if p := sysLookPath("deluser"); p != "" {
		argv = []string{p}
		if k.boolean("purge", false) {
			argv = append(argv, "--remove-home")
		}
	} else {
		return sysFail(name, "Failed to remove user %s: neither userdel nor deluser is installed", name)
	}
	if err := pkgCheck(sysRun(ctx, "", nil, append(argv, name)...)); err != nil {
		return sysFail(name, "Failed to remove user %s", name)
	}
	changes := map[string]any{}
	groups, _ := userReadGroups()
	for _, g := range before {
		found := false
		for _, x := range groups {
			found = found || x.name == g
		}
		if !found {
			changes[g+" group"] = "removed"
		}
	}
	changes[name] = "removed"
	return state.Ret{Name: name, Result: state.True, Changes: changes, Comment: fmt.Sprintf("Removed user %s", name)}
}

// --- group.present ---

func groupGet(name string) (*groupEnt, []*groupEnt, error) {
	gs, err := userReadGroups()
	if err != nil {
		return nil, nil, err
	}
	for _, g := range gs {
		if g.name == name {
			return g, gs, nil
		}
	}
	return nil, gs, nil
}

func groupInfo(g *groupEnt) map[string]any {
	m := make([]any, len(g.members))
	for i, x := range g.members {
		m[i] = x
	}
	return map[string]any{"name": g.name, "passwd": "x", "gid": g.gid, "members": m}
}

func groupAddUser(ctx context.Context, group, user string) error {
	if p := sysLookPath("gpasswd"); p != "" {
		return pkgCheck(sysRun(ctx, "", nil, p, "-a", user, group))
	}
	if p := sysLookPath("addgroup"); p != "" {
		return pkgCheck(sysRun(ctx, "", nil, p, user, group))
	}
	return fmt.Errorf("neither gpasswd nor addgroup is installed")
}

func groupDelUser(ctx context.Context, group, user string) error {
	if p := sysLookPath("gpasswd"); p != "" {
		return pkgCheck(sysRun(ctx, "", nil, p, "-d", user, group))
	}
	if p := sysLookPath("delgroup"); p != "" {
		return pkgCheck(sysRun(ctx, "", nil, p, user, group))
	}
	return fmt.Errorf("neither gpasswd nor delgroup is installed")
}

// groupChanges is group._changes; nil when the group does not exist.
func groupChanges(g *groupEnt, gid *int, addusers, delusers, members []string, hasMembers bool) map[string]any {
	if g == nil {
		return nil
	}
	ch := map[string]any{}
	if gid != nil && *gid != g.gid {
		ch["gid"] = *gid
	}
	in := func(l []string, s string) bool {
		for _, x := range l {
			if x == s {
				return true
			}
		}
		return false
	}
	if hasMembers {
		differ := len(members) != len(g.members)
		for _, m := range members {
			differ = differ || !in(g.members, m)
		}
		if differ {
			if len(members) == 0 {
				ch["delusers"] = append([]string(nil), g.members...)
			} else {
				ch["members"] = members
			}
		}
	}
	var add, del []string
	for _, u := range addusers {
		if !in(g.members, u) {
			add = append(add, u)
		}
	}
	for _, u := range delusers {
		if in(g.members, u) {
			del = append(del, u)
		}
	}
	if len(add) > 0 {
		ch["addusers"] = add
	}
	if len(del) > 0 {
		ch["delusers"] = del
	}
	return ch
}

// groupPresent is Salt's group.present.
func groupPresent(ctx context.Context, c *Call) state.Ret {
	name := c.Name
	if b := userBad("group", name); b != "" {
		return sysFail(name, "%s", b)
	}
	k := sysKw(c.Chunk)
	var gid *int
	if n, ok, err := k.integer("gid"); err != nil {
		return sysFail(name, "Invalid gid")
	} else if ok {
		gid = &n
	}
	var lists [3][]string
	var has [3]bool
	for i, key := range []string{"addusers", "delusers", "members"} {
		l, ok, err := k.list(key, true)
		if err != nil {
			return sysFail(name, "%v", err)
		}
		for _, u := range l {
			if b := userBad("user", u); b != "" {
				return sysFail(name, "%s", b)
			}
		}
		lists[i], has[i] = l, ok
	}
	addusers, delusers, members := lists[0], lists[1], lists[2]
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}, Comment: fmt.Sprintf("Group %s is present and up to date", name)}
	if has[2] && (has[0] || has[1]) {
		ret.Result = state.None
		ret.Comment = `Error: Conflicting options "members" with "addusers" and/or "delusers" can not be used together. `
		return ret
	}
	for _, a := range addusers {
		for _, d := range delusers {
			if a == d {
				ret.Result = state.None
				ret.Comment = "Error. Same user(s) can not be added and deleted simultaneously"
				return ret
			}
		}
	}
	g, all, err := groupGet(name)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	if g != nil {
		ch := groupChanges(g, gid, addusers, delusers, members, has[2])
		if len(ch) == 0 {
			return ret
		}
		var b strings.Builder
		b.WriteString("The following group attributes are set to be changed:\n")
		for _, key := range []string{"gid", "members", "addusers", "delusers"} {
			if v, ok := ch[key]; ok {
				fmt.Fprintf(&b, "%s: %v\n", key, v)
			}
		}
		ret.Comment = b.String()
		if c.Test {
			ret.Result = state.None
			return ret
		}
		if err := groupApply(ctx, name, ch, members); err != nil {
			ret.Comment += err.Error() + "\n"
		}
		g2, _, _ := groupGet(name)
		if left := groupChanges(g2, gid, addusers, delusers, members, has[2]); len(left) > 0 {
			ret.Result = state.False
			ret.Comment += "Some changes could not be applied"
			ret.Changes = map[string]any{"Failed": left}
		} else {
			ret.Changes = map[string]any{"Final": "All changes applied successfully"}
		}
		return ret
	}
	if c.Test {
		ret.Result = state.None
		ret.Comment = fmt.Sprintf("Group %s set to be added", name)
		return ret
	}
	if gid != nil && !k.boolean("non_unique", false) {
		for _, x := range all {
			if x.gid == *gid {
				return sysFail(name, "Group %s is not present but gid %d is already taken by group %s", name, *gid, x.name)
			}
		}
	}
	if err := groupAdd(ctx, name, gid, k.boolean("system", false), k.boolean("non_unique", false)); err != nil {
		return sysFail(name, "Failed to create new group %s: %v", name, err)
	}
	users := members
	if len(addusers) > 0 {
		users = addusers
	}
	if len(users) > 0 {
		groupApply(ctx, name, map[string]any{"members": users}, users)
	}
	g, _, _ = groupGet(name)
	if g == nil {
		return sysFail(name, "Failed to create new group %s", name)
	}
	ret.Comment = fmt.Sprintf("New group %s created", name)
	ret.Changes = groupInfo(g)
	if left := groupChanges(g, gid, addusers, delusers, members, has[2]); len(left) > 0 {
		ret.Result = state.False
		ret.Comment = fmt.Sprintf("Group %s has been created but, some changes could not be applied", name)
		ret.Changes = map[string]any{"Failed": left}
	}
	return ret
}

func groupAdd(ctx context.Context, name string, gid *int, system, nonUnique bool) error {
	if p := sysLookPath("groupadd"); p != "" {
		argv := []string{p}
		if gid != nil {
			argv = append(argv, "-g", strconv.Itoa(*gid))
			if nonUnique {
				argv = append(argv, "-o")
			}
		}
		if system {
			argv = append(argv, "-r")
		}
		return pkgCheck(sysRun(ctx, "", nil, append(argv, name)...))
	}
	p := sysLookPath("addgroup")
	if p == "" {
		return fmt.Errorf("neither groupadd nor addgroup is installed")
	}
	argv := []string{p}
	if gid != nil {
		argv = append(argv, "-g", strconv.Itoa(*gid))
	}
	if system {
		argv = append(argv, "-S")
	}
	return pkgCheck(sysRun(ctx, "", nil, append(argv, name)...))
}

func groupApply(ctx context.Context, name string, ch map[string]any, members []string) error {
	if v, ok := ch["gid"]; ok {
		p := sysLookPath("groupmod")
		if p == "" {
			return fmt.Errorf("groupmod is not installed: cannot change the gid")
		}
		if err := pkgCheck(sysRun(ctx, "", nil, p, "-g", fmt.Sprint(v), name)); err != nil {
			return err
		}
	}
	if _, ok := ch["members"]; ok {
		if p := sysLookPath("gpasswd"); p != "" {
			if err := pkgCheck(sysRun(ctx, "", nil, p, "-M", strings.Join(members, ","), name)); err != nil {
				return err
			}
		} else {
			g, _, _ := groupGet(name)
			if g != nil {
				for _, m := range g.members {
					groupDelUser(ctx, name, m)
				}
			}
			for _, m := range members {
				if err := groupAddUser(ctx, name, m); err != nil {
					return err
				}
			}
		}
	}
	if l, ok := ch["addusers"].([]string); ok {
		for _, u := range l {
			if err := groupAddUser(ctx, name, u); err != nil {
				return err
			}
		}
	}
	if l, ok := ch["delusers"].([]string); ok {
		for _, u := range l {
			if err := groupDelUser(ctx, name, u); err != nil {
				return err
			}
		}
	}
	return nil
}
