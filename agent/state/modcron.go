package state

// The cron state module, after Salt 3006's salt/states/cron.py (present,
// absent) over salt/modules/cron.py: the user's crontab is read with
// `crontab -u USER -l` and written with `crontab -u USER -` (BusyBox's
// crontab takes both), or, when cronTabDir is set, read and written as the
// file cronTabDir/USER. Salt's lines keep their shape: the managed block
// after "# Lines below here are managed by Salt, do not edit", each job
// after a "# SALT_CRON_IDENTIFIER:<id>" comment.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/halite-fleet/halite/state"
)

// Where crontabs are: the crontab program, or a directory of files named
// by user (tests, and devices whose cron reads such a directory).
var (
	cronCrontab = "crontab"
	cronTabDir  = ""
)

const (
	cronTag          = "# Lines below here are managed by Salt, do not edit"
	cronIdentifier   = "SALT_CRON_IDENTIFIER"
	cronNoIdentifier = "NO ID SET"
)

func init() {
	Register("cron.present", Mod{Run: cronPresent, Doc: `Verifies that the specified cron job is present for the specified user.

    name        the command
    user        the crontab's user (default root)
    minute, hour, daymonth, month, dayweek  the schedule (default *)
    comment     a comment line above the job
    commented   the job is present but disabled (#DISABLED#)
    identifier  the job's id (default: name)
    special     @reboot, @hourly, ... instead of the schedule`})
	Register("cron.absent", Mod{Run: cronAbsent, Doc: "Verifies that the specified cron job is absent for the specified user (name, user, identifier, special)."})
}

// cronJob is one managed job (a schedule line or a special one).
type cronJob struct {
	minute, hour, daymonth, month, dayweek string
	spec                                   string // special: "@reboot"
	cmd                                    string
	identifier                             string // "" none
	comment                                *string
	commented                              bool
}

// cronTab is cron.list_tab.
type cronTab struct {
	pre  []string
	env  [][2]string
	jobs []*cronJob // crons then specials, as rendered
}

func cronRead(ctx context.Context, user string) (string, error) {
	if cronTabDir != "" {
		b, err := os.ReadFile(filepath.Join(cronTabDir, user))
		if os.IsNotExist(err) {
			return "", nil
		}
		return string(b), err
	}
	prog := sysLookPath(cronCrontab)
	if prog == "" {
		return "", fmt.Errorf("crontab is not installed")
	}
	o, err := sysRun(ctx, "", nil, prog, "-u", user, "-l")
	if err != nil {
		return "", err
	}
	if o.retcode != 0 {
		if strings.Contains(o.stderr, "no crontab for") {
			return "", nil
		}
		return "", fmt.Errorf("crontab -l: %s", o.message())
	}
	return o.stdout, nil
}

func cronWrite(ctx context.Context, user, text string) error {
	if cronTabDir != "" {
		return sysWriteAtomic(filepath.Join(cronTabDir, user), []byte(text), 0o600)
	}
	prog := sysLookPath(cronCrontab)
	if prog == "" {
		return fmt.Errorf("crontab is not installed")
	}
	o, err := sysRun(ctx, text, nil, prog, "-u", user, "-")
	if err != nil {
		return err
	}
	if o.retcode != 0 {
		return fmt.Errorf("%s", o.message())
	}
	return nil
}

// cronParse is cron.list_tab.
func cronParse(data string) *cronTab {
	t := &cronTab{}
	flag := false
	var comment *string
	identifier := ""
	for _, line := range strings.Split(strings.TrimRight(data, "\n"), "\n") {
		if line == cronTag {
			flag = true
			continue
		}
		if !flag {
			if line != "" || len(t.pre) > 0 {
				t.pre = append(t.pre, line)
			}
			continue
		}
		commented := false
		if strings.HasPrefix(line, "#DISABLED#") {
			line, commented = line[10:], true
		}
		switch {
		case strings.HasPrefix(line, "@"):
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			t.jobs = append(t.jobs, &cronJob{spec: f[0], cmd: strings.Join(f[1:], " "), identifier: identifier, comment: comment, commented: commented})
			identifier, comment = "", nil
		case strings.HasPrefix(line, "#"):
			cl := strings.TrimLeft(line, "# ")
			if i := strings.Index(cl, cronIdentifier); i >= 0 {
				rest := cl[i+len(cronIdentifier):]
				cl = strings.TrimRight(cl[:i], " ")
				if len(rest) > 1 {
					identifier = rest[1:]
				}
			}
			if comment == nil {
				comment = &cl
			} else {
				s := *comment + "\n" + cl
				comment = &s
			}
		case strings.Index(line, "=") > 0 && (!strings.Contains(line, " ") || strings.Index(line, "=") < strings.Index(line, " ")):
			kv := strings.SplitN(line, "=", 2)
			t.env = append(t.env, [2]string{kv[0], kv[1]})
		case len(strings.Split(line, " ")) > 5:
			f := strings.Split(line, " ")
			t.jobs = append(t.jobs, &cronJob{minute: f[0], hour: f[1], daymonth: f[2], month: f[3], dayweek: f[4],
				cmd: strings.Join(f[5:], " "), identifier: identifier, comment: comment, commented: commented})
			identifier, comment = "", nil
		}
	}
	return t
}

// render is cron._render_tab.
func (t *cronTab) render() string {
	var b strings.Builder
	for _, p := range t.pre {
		b.WriteString(p + "\n")
	}
	b.WriteString(cronTag + "\n")
	for _, e := range t.env {
		if e[1] == "" {
			fmt.Fprintf(&b, "%s=\"\"\n", e[0])
		} else {
			fmt.Fprintf(&b, "%s=%s\n", e[0], e[1])
		}
	}
	write := func(j *cronJob) {
		if j.comment != nil || j.identifier != "" {
			b.WriteString("#")
			if j.comment != nil && *j.comment != "" {
				b.WriteString(" " + strings.ReplaceAll(strings.TrimRight(*j.comment, " \n"), "\n", "\n# "))
			}
			if j.identifier != "" {
				fmt.Fprintf(&b, " %s:%s", cronIdentifier, j.identifier)
			}
			b.WriteString("\n")
		}
		if j.commented {
			b.WriteString("#DISABLED#")
		}
		if j.spec != "" {
			fmt.Fprintf(&b, "%s %s\n", j.spec, j.cmd)
		} else {
			fmt.Fprintf(&b, "%s %s %s %s %s %s\n", j.minute, j.hour, j.daymonth, j.month, j.dayweek, j.cmd)
		}
	}
	for _, j := range t.jobs {
		if j.spec == "" {
			write(j)
		}
	}
	for _, j := range t.jobs {
		if j.spec != "" {
			write(j)
		}
	}
	return b.String()
}

// matched is cron._cron_matched: by identifier when the job has one, else
// by command.
func (j *cronJob) matched(cmd, identifier string) bool {
	if j.identifier != "" {
		return j.identifier == identifier
	}
	return j.cmd == cmd
}

// cronArgs reads the state's arguments as Salt's present does.
type cronArgs struct {
	user, cmd, identifier                  string
	minute, hour, daymonth, month, dayweek string
	special                                string
	comment                                *string
	commented                              bool
}

func cronReadArgs(c *Call) (*cronArgs, string) {
	k := sysKw(c.Chunk)
	a := &cronArgs{cmd: strings.TrimSpace(c.Name), user: "root"}
	if a.cmd == "" || strings.ContainsAny(a.cmd, "\n\r\x00") {
		return nil, "Invalid cron job: the command must be one non-empty line"
	}
	if u, ok, err := k.str("user"); err != nil {
		return nil, err.Error()
	} else if ok {
		a.user = u
	}
	if bad := sysBadName("user", a.user, ":,/"); bad != "" {
		return nil, bad
	}
	a.identifier = a.cmd
	if v, ok := k["identifier"]; ok && v != false && v != nil {
		s, _ := sysScalar(v)
		a.identifier = s
	}
	if strings.ContainsAny(a.identifier, "\n\r\x00") {
		return nil, "Invalid cron identifier: it must be one line"
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"minute", &a.minute}, {"hour", &a.hour}, {"daymonth", &a.daymonth}, {"month", &a.month}, {"dayweek", &a.dayweek}} {
		*f.dst = "*"
		s, ok, err := k.str(f.key)
		if err != nil {
			return nil, err.Error()
		}
		if ok {
			*f.dst = strings.ToLower(s)
		}
		if *f.dst == "" || strings.ContainsAny(*f.dst, " \t\n\r\x00") {
			return nil, fmt.Sprintf("Invalid cron %s %q", f.key, *f.dst)
		}
	}
	if s, ok, err := k.str("special"); err != nil {
		return nil, err.Error()
	} else if ok {
		if !strings.HasPrefix(s, "@") || strings.ContainsAny(s, " \t\n\r") {
			return nil, fmt.Sprintf("Invalid cron special %q", s)
		}
		a.special = s
	}
	if s, ok, err := k.str("comment"); err != nil {
		return nil, err.Error()
	} else if ok {
		a.comment = &s
	}
	a.commented = k.boolean("commented", false)
	return a, ""
}

// find returns the index of the job a matches (among specials when special
// is set), or -1.
func (t *cronTab) find(a *cronArgs) int {
	for i, j := range t.jobs {
		if (j.spec != "") == (a.special != "") && j.matched(a.cmd, a.identifier) {
			return i
		}
	}
	return -1
}

// needs reports whether job j differs from what a declares.
func (a *cronArgs) differs(j *cronJob) bool {
	cmt := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	if a.comment != nil && cmt(a.comment) != cmt(j.comment) {
		return true
	}
	if j.cmd != a.cmd || j.identifier != a.identifier || j.commented != a.commented {
		return true
	}
	if a.special != "" {
		return j.spec != a.special
	}
	return j.minute != a.minute || j.hour != a.hour || j.daymonth != a.daymonth || j.month != a.month || j.dayweek != a.dayweek
}

func (a *cronArgs) job() *cronJob {
	return &cronJob{minute: a.minute, hour: a.hour, daymonth: a.daymonth, month: a.month, dayweek: a.dayweek,
		spec: a.special, cmd: a.cmd, identifier: a.identifier, comment: a.comment, commented: a.commented}
}

// cronPresent is Salt's cron.present.
func cronPresent(ctx context.Context, c *Call) state.Ret {
	a, bad := cronReadArgs(c)
	if bad != "" {
		return sysFail(c.Name, "%s", bad)
	}
	name := a.cmd
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	data, err := cronRead(ctx, a.user)
	if err != nil {
		return sysFail(name, "Cron %s for user %s failed to commit with error \n%v", name, a.user, err)
	}
	t := cronParse(data)
	i := t.find(a)
	status := "absent"
	if i >= 0 {
		status = "present"
		if a.differs(t.jobs[i]) {
			status = "update"
		}
	}
	if c.Test {
		ret.Result = state.None
		switch status {
		case "absent":
			ret.Comment = fmt.Sprintf("Cron %s is set to be added", name)
		case "present":
			ret.Result = state.True
			ret.Comment = fmt.Sprintf("Cron %s already present", name)
		default:
			ret.Comment = fmt.Sprintf("Cron %s is set to be updated", name)
		}
		return ret
	}
	if status == "present" {
		ret.Comment = fmt.Sprintf("Cron %s already present", name)
		return ret
	}
	j := a.job()
	if i >= 0 {
		old := t.jobs[i]
		if a.comment == nil {
			j.comment = old.comment // Salt keeps what was not asked to change
		}
		t.jobs = append(t.jobs[:i], t.jobs[i+1:]...)
	}
	t.jobs = append(t.jobs, j)
	if err := cronWrite(ctx, a.user, t.render()); err != nil {
		return sysFail(name, "Cron %s for user %s failed to commit with error \n%v", name, a.user, err)
	}
	ret.Changes = map[string]any{a.user: name}
	if status == "absent" {
		ret.Comment = fmt.Sprintf("Cron %s added to %s's crontab", name, a.user)
	} else {
		ret.Comment = fmt.Sprintf("Cron %s updated", name)
	}
	return ret
}

// cronAbsent is Salt's cron.absent.
func cronAbsent(ctx context.Context, c *Call) state.Ret {
	a, bad := cronReadArgs(c)
	if bad != "" {
		return sysFail(c.Name, "%s", bad)
	}
	name := a.cmd
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	data, err := cronRead(ctx, a.user)
	if err != nil {
		return sysFail(name, "Cron %s for user %s failed to commit with error %v", name, a.user, err)
	}
	t := cronParse(data)
	i := t.find(a)
	if c.Test {
		if i < 0 {
			ret.Comment = fmt.Sprintf("Cron %s is absent", name)
		} else {
			ret.Result = state.None
			ret.Comment = fmt.Sprintf("Cron %s is set to be removed", name)
		}
		return ret
	}
	if i < 0 {
		ret.Comment = fmt.Sprintf("Cron %s already absent", name)
		return ret
	}
	t.jobs = append(t.jobs[:i], t.jobs[i+1:]...)
	if err := cronWrite(ctx, a.user, t.render()); err != nil {
		return sysFail(name, "Cron %s for user %s failed to commit with error %v", name, a.user, err)
	}
	ret.Changes = map[string]any{a.user: name}
	ret.Comment = fmt.Sprintf("Cron %s removed from %s's crontab", name, a.user)
	return ret
}
