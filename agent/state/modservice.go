package state

// The service state module, after Salt 3006's salt/states/service.py
// (running, dead, enabled, disabled, mod_watch) over the init systems
// cameras run, each after the Salt execution module that drives it:
// systemd (salt/modules/systemd_service.py: systemctl), SysV and BusyBox
// init.d scripts (salt/modules/debian_service.py and linux_service.py:
// /etc/init.d/NAME start|stop|status|restart|reload, enablement by the
// S/K links of /etc/rc?.d or update-rc.d where present) and OpenWrt's procd
// (/etc/init.d/NAME enable|disable|enabled|running).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/state"
)

// The paths the service providers use, variables so that tests run against
// a test root.
var (
	svcInitDir        = "/etc/init.d"
	svcRcRoot         = "/etc" // holds rc0.d ... rc6.d, rcS.d
	svcSystemctl      = "systemctl"
	svcSystemdBooted  = "/run/systemd/system" // salt.utils.systemd.booted
	svcOpenWrtRelease = "/etc/openwrt_release"
	svcUpdateRcD      = "update-rc.d"
	svcRunlevel       = "runlevel"
	svcProcRoot       = "/proc"
)

func init() {
	Register("service.running", Mod{Run: svcRunning, Doc: `Ensure that the service is running.

    name        the init script or unit
    enable      True: enable at boot, False: disable, absent: leave
    sig         a string to look for in the process list instead of the status command
    init_delay  seconds to wait after starting
    reload      on a watched change, reload instead of restart
    no_block    systemd only: do not wait for the job`})
	Register("service.dead", Mod{Run: svcDead, Doc: "Ensure that the named service is dead by stopping the service if it is running (enable, sig, init_delay as service.running)."})
	Register("service.enabled", Mod{Run: svcEnabled, Doc: "Ensure that the service is enabled on boot."})
	Register("service.disabled", Mod{Run: svcDisabled, Doc: "Ensure that the service is disabled on boot."})
	RegisterWatch("service", svcModWatch)
}

// svcProvider is one init system, as Salt's service execution modules.
type svcProvider interface {
	available(ctx context.Context, name string) (bool, error)
	status(ctx context.Context, name string) (bool, error)
	// action runs start, stop, restart or reload; an error says why it
	// failed (Salt's CommandExecutionError) or false that it did.
	action(ctx context.Context, verb, name string, noBlock bool) (bool, error)
	// canEnable: Salt has service.enable / service.enabled here.
	canEnable() bool
	enabled(ctx context.Context, name string) (bool, error)
	setEnabled(ctx context.Context, name string, on bool) (bool, error)
}

// svcDetect chooses the provider as Salt's service __virtual__ functions
// do: systemd when the system was booted with it, procd on OpenWrt, else
// the init.d scripts. The agent's service_init_dir option (Halite's)
// names an init.d directory to use whatever the init system.
func svcDetect(h Host) svcProvider {
	if dir, _ := optsOf(h)["service_init_dir"].(string); dir != "" {
		return svcSysV{initDir: dir, rcRoot: filepath.Dir(dir)}
	}
	if _, err := os.Stat(svcSystemdBooted); err == nil {
		if p := sysLookPath(svcSystemctl); p != "" {
			return svcSystemd{systemctl: p}
		}
	}
	if _, err := os.Stat(svcOpenWrtRelease); err == nil {
		return svcProcd{}
	}
	return svcSysV{}
}

// svcBadName refuses names that are not one init script or unit.
func svcBadName(name string) string { return sysBadName("service", name, "/\\*?[") }

// --- SysV and BusyBox init.d ---

// svcSysV drives init.d scripts under initDir, with the rc?.d links under
// rcRoot; both "": svcInitDir and svcRcRoot. With initDir set it never
// runs update-rc.d, which knows only /etc.
type svcSysV struct{ initDir, rcRoot string }

func (p svcSysV) script(name string) string { return filepath.Join(p.dir(), name) }

func (p svcSysV) dir() string {
	if p.initDir != "" {
		return p.initDir
	}
	return svcInitDir
}

func (p svcSysV) rc() string {
	if p.rcRoot != "" {
		return p.rcRoot
	}
	return svcRcRoot
}

func (p svcSysV) updateRcD() string {
	if p.initDir != "" {
		return ""
	}
	return sysLookPath(svcUpdateRcD)
}

func (p svcSysV) available(ctx context.Context, name string) (bool, error) {
	fi, err := os.Stat(p.script(name))
	return err == nil && fi.Mode().IsRegular(), nil
}

func (p svcSysV) status(ctx context.Context, name string) (bool, error) {
	o, err := sysRun(ctx, "", nil, p.script(name), "status")
	return err == nil && o.retcode == 0, err
}

func (p svcSysV) action(ctx context.Context, verb, name string, _ bool) (bool, error) {
	o, err := sysRun(ctx, "", nil, p.script(name), verb)
	return err == nil && o.retcode == 0, err
}

func (p svcSysV) canEnable() bool {
	if p.updateRcD() != "" {
		return true
	}
	fi, err := os.Stat(filepath.Join(p.rc(), "rc2.d"))
	return err == nil && fi.IsDir()
}

// runlevel is debian_service._get_runlevel: "2" when unknown (containers).
func (svcSysV) runlevel(ctx context.Context) string {
	if p := sysLookPath(svcRunlevel); p != "" {
		if o, err := sysRun(ctx, "", nil, p); err == nil && o.retcode == 0 {
			if f := strings.Fields(o.stdout); len(f) == 2 && len(f[1]) == 1 && f[1][0] >= '0' && f[1][0] <= '9' {
				return f[1]
			}
		}
	}
	return "2"
}

var svcLinkRe = regexp.MustCompile(`^([SK])(\d+)(.+)$`)

// links lists NAME's S/K links in rc<level>.d: name -> "S" or "K".
func (p svcSysV) links(level, name string) map[string]string {
	out := map[string]string{}
	ents, _ := os.ReadDir(filepath.Join(p.rc(), "rc"+level+".d"))
	for _, e := range ents {
		if m := svcLinkRe.FindStringSubmatch(e.Name()); m != nil && m[3] == name {
			out[e.Name()] = m[1]
		}
	}
	return out
}

// enabled is debian_service.enabled: an S link in rcS.d or rc<runlevel>.d.
func (p svcSysV) enabled(ctx context.Context, name string) (bool, error) {
	for _, lvl := range []string{"S", p.runlevel(ctx)} {
		for _, kind := range p.links(lvl, name) {
			if kind == "S" {
				return true, nil
			}
		}
	}
	return false, nil
}

// setEnabled runs update-rc.d where it is (as debian_service: defaults,
// then enable / disable), else renames or makes the links of runlevels 2
// to 5 itself (S20NAME -> ../init.d/NAME), as update-rc.d would.
func (p svcSysV) setEnabled(ctx context.Context, name string, on bool) (bool, error) {
	if u := p.updateRcD(); u != "" {
		verb := "disable"
		if on {
			if o, err := sysRun(ctx, "", nil, u, name, "defaults"); err != nil || o.retcode != 0 {
				return false, svcCmdErr(o, err)
			}
			verb = "enable"
		}
		o, err := sysRun(ctx, "", nil, u, name, verb)
		if err != nil || o.retcode != 0 {
			return false, svcCmdErr(o, err)
		}
		return true, nil
	}
	from, to := "K", "S"
	if !on {
		from, to = "S", "K"
	}
	for _, lvl := range []string{"2", "3", "4", "5"} {
		dir := filepath.Join(p.rc(), "rc"+lvl+".d")
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		links := p.links(lvl, name)
		done := false
		for l, kind := range links {
			switch kind {
			case from:
				if err := os.Rename(filepath.Join(dir, l), filepath.Join(dir, to+l[1:])); err != nil {
					return false, err
				}
				done = true
			case to:
				done = true
			}
		}
		if !done && on {
			if err := os.Symlink("../init.d/"+name, filepath.Join(dir, "S20"+name)); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

func svcCmdErr(o sysOut, err error) error {
	if err != nil {
		return err
	}
	return errors.New(o.message())
}

// --- OpenWrt procd ---

type svcProcd struct{ svcSysV }

func (p svcProcd) status(ctx context.Context, name string) (bool, error) {
	o, err := sysRun(ctx, "", nil, p.script(name), "running")
	return err == nil && o.retcode == 0, err
}

func (svcProcd) canEnable() bool { return true }

func (p svcProcd) enabled(ctx context.Context, name string) (bool, error) {
	o, err := sysRun(ctx, "", nil, p.script(name), "enabled")
	return err == nil && o.retcode == 0, err
}

func (p svcProcd) setEnabled(ctx context.Context, name string, on bool) (bool, error) {
	verb := "disable"
	if on {
		verb = "enable"
	}
	o, err := sysRun(ctx, "", nil, p.script(name), verb)
	return err == nil && o.retcode == 0, err
}

// --- systemd ---

type svcSystemd struct{ systemctl string }

// unit is systemd_service._canonical_unit_name.
func svcUnit(name string) string {
	for _, s := range []string{".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target", ".path", ".timer"} {
		if strings.HasSuffix(name, s) {
			return name
		}
	}
	return name + ".service"
}

// svcSystemctlArgs is systemd_service._systemctl_cmd (without the scope).
func svcSystemctlArgs(systemctl, action, name string, noBlock bool) []string {
	argv := []string{systemctl}
	if noBlock {
		argv = append(argv, "--no-block")
	}
	return append(argv, action, svcUnit(name))
}

func (p svcSystemd) run(ctx context.Context, action, name string, noBlock bool) (sysOut, error) {
	return sysRun(ctx, "", nil, svcSystemctlArgs(p.systemctl, action, name, noBlock)...)
}

func (p svcSystemd) available(ctx context.Context, name string) (bool, error) {
	o, err := sysRun(ctx, "", nil, p.systemctl, "show", "--property=LoadState", "--value", svcUnit(name))
	if err != nil {
		return false, err
	}
	s := strings.TrimSpace(o.stdout)
	return o.retcode == 0 && s != "" && s != "not-found", nil
}

func (p svcSystemd) status(ctx context.Context, name string) (bool, error) {
	o, err := p.run(ctx, "is-active", name, false)
	return err == nil && o.retcode == 0, err
}

func (p svcSystemd) action(ctx context.Context, verb, name string, noBlock bool) (bool, error) {
	o, err := p.run(ctx, verb, name, noBlock)
	if err != nil || o.retcode != 0 {
		return false, svcCmdErr(o, err)
	}
	return true, nil
}

func (svcSystemd) canEnable() bool { return true }

func (p svcSystemd) enabled(ctx context.Context, name string) (bool, error) {
	o, err := p.run(ctx, "is-enabled", name, false)
	return err == nil && o.retcode == 0, err
}

func (p svcSystemd) setEnabled(ctx context.Context, name string, on bool) (bool, error) {
	verb := "disable"
	if on {
		verb = "enable"
	}
	o, err := p.run(ctx, verb, name, false)
	if err != nil || (on && o.retcode != 0) {
		return false, svcCmdErr(o, err)
	}
	return o.retcode == 0, nil
}

// --- sig: Salt's status.pid, over /proc ---

// svcSigRunning reports whether a process's command line contains sig.
func svcSigRunning(sig string) bool {
	ents, _ := os.ReadDir(svcProcRoot)
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		if e.Name() == self || e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join(svcProcRoot, e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), sig) {
			return true
		}
	}
	return false
}

// --- the state functions ---

// svcRun is one service state: the provider and the arguments.
type svcRun struct {
	ctx     context.Context
	c       *Call
	p       svcProvider
	name    string
	sig     string
	noBlock bool
}

func newSvcRun(ctx context.Context, c *Call) (*svcRun, string) {
	if bad := svcBadName(c.Name); bad != "" {
		return nil, bad
	}
	k := sysKw(c.Chunk)
	sig, _, err := k.str("sig")
	if err != nil {
		return nil, err.Error()
	}
	return &svcRun{ctx: ctx, c: c, p: svcDetect(c.Host), name: c.Name, sig: sig, noBlock: k.boolean("no_block", false)}, ""
}

func (r *svcRun) status() bool {
	if r.sig != "" {
		return svcSigRunning(r.sig)
	}
	ok, _ := r.p.status(r.ctx, r.name)
	return ok
}

func (r *svcRun) isEnabled() bool {
	if !r.p.canEnable() {
		return true // Salt: no service.enabled -> True
	}
	ok, _ := r.p.enabled(r.ctx, r.name)
	return ok
}

// svcEnableArg reads enable: True, False, or absent (nil).
func svcEnableArg(k sysKw) *bool {
	v, ok := k["enable"]
	if !ok || v == nil {
		return nil
	}
	b := sysTrue(v)
	return &b
}

// started is Salt's started argument of _enable/_disable: true, false or
// nil ("in the desired state").
type svcStarted int8

const (
	svcStartedNone svcStarted = iota
	svcStartedTrue
	svcStartedFalse
)

func svcStartedOf(b bool) svcStarted {
	if b {
		return svcStartedTrue
	}
	return svcStartedFalse
}

// toggle is Salt's _enable (on) or _disable: it updates ret's result,
// comment and changes.
func (r *svcRun) toggle(ret *state.Ret, on bool, started svcStarted, result bool) {
	name := r.name
	if ok, _ := r.p.available(r.ctx, name); !ok {
		if on {
			ret.Result = state.False
		} else {
			ret.Result = state.True
		}
		ret.Comment = fmt.Sprintf("The named service %s is not available", name)
		return
	}
	ret.Result = svcResult(result)
	word, Word := "disable", "Disable"
	if on {
		word, Word = "enable", "Enable"
	}
	pick := func(running, desired, dead string) string {
		switch started {
		case svcStartedTrue:
			return running
		case svcStartedNone:
			return desired
		}
		return dead
	}
	if !r.p.canEnable() {
		ret.Comment = pick(
			fmt.Sprintf("%s is not available on this minion, service %s started", Word, name),
			fmt.Sprintf("%s is not available on this minion, service %s is in the desired state", Word, name),
			fmt.Sprintf("%s is not available on this minion, service %s is dead", Word, name))
		return
	}
	before, _ := r.p.enabled(r.ctx, name)
	if before == on {
		if started == svcStartedNone {
			ret.Changes = map[string]any{}
		}
		ret.Comment = pick(
			fmt.Sprintf("Service %s is already %sd, and is running", name, word),
			fmt.Sprintf("Service %s is already %sd, and is in the desired state", name, word),
			fmt.Sprintf("Service %s is already %sd, and is dead", name, word))
		return
	}
	if r.c.Test {
		ret.Result = state.None
		ret.Comment = fmt.Sprintf("Service %s set to be %sd", name, word)
		return
	}
	ok, err := r.p.setEnabled(r.ctx, name, on)
	if ok {
		ret.Changes = map[string]any{}
		if after, _ := r.p.enabled(r.ctx, name); after != before {
			ret.Changes[name] = true
		}
		ret.Comment = pick(
			fmt.Sprintf("Service %s has been %sd, and is running", name, word),
			fmt.Sprintf("Service %s has been %sd, and is in the desired state", name, word),
			fmt.Sprintf("Service %s has been %sd, and is dead", name, word))
		return
	}
	ret.Result = state.False
	if on {
		ret.Comment = pick(
			fmt.Sprintf("Failed when setting service %s to start at boot, but the service is running", name),
			fmt.Sprintf("Failed when setting service %s to start at boot, but the service was already running", name),
			fmt.Sprintf("Failed when setting service %s to start at boot, and the service is dead", name))
	} else {
		ret.Comment = pick(
			fmt.Sprintf("Failed when setting service %s to not start at boot, and is running", name),
			fmt.Sprintf("Failed when setting service %s to not start at boot, but the service was already running", name),
			fmt.Sprintf("Failed when setting service %s to not start at boot, and the service is dead", name))
	}
	if err != nil {
		ret.Comment += ". Additional information follows:\n\n" + err.Error()
	}
}

func svcResult(b bool) state.Result {
	if b {
		return state.True
	}
	return state.False
}

func svcDelay(ctx context.Context, k sysKw) (float64, string) {
	v := k["init_delay"]
	if v == nil {
		return 0, ""
	}
	f, ok := sysFloat(v)
	if !ok {
		if s, isStr := v.(string); isStr {
			var err error
			if f, err = strconv.ParseFloat(s, 64); err == nil {
				ok = true
			}
		}
	}
	if !ok || f < 0 || f > 3600 {
		return 0, "init_delay must be a number of seconds (0 to 3600)"
	}
	if f > 0 {
		t := time.NewTimer(time.Duration(f * float64(time.Second)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return f, ""
}

func svcPyNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// svcRunning is Salt's service.running.
func svcRunning(ctx context.Context, c *Call) state.Ret {
	return svcRunOrDead(ctx, c, true)
}

// svcDead is Salt's service.dead.
func svcDead(ctx context.Context, c *Call) state.Ret {
	return svcRunOrDead(ctx, c, false)
}

func svcRunOrDead(ctx context.Context, c *Call, up bool) state.Ret {
	ret := state.Ret{Name: c.Name, Result: state.True, Changes: map[string]any{}}
	k := sysKw(c.Chunk)
	if k.has("enabled") {
		ret.Result = state.False
		ret.Comment = fmt.Sprintf(`Service %s uses non-existent option "enabled".  Perhaps "enable" option was intended?`, c.Name)
		return ret
	}
	r, bad := newSvcRun(ctx, c)
	if bad != "" {
		return sysFail(c.Name, "%s", bad)
	}
	enable := svcEnableArg(k)
	name := r.name
	if ok, err := r.p.available(ctx, name); err != nil {
		return sysFail(name, "%v", err)
	} else if !ok {
		ret.Comment = fmt.Sprintf("The named service %s is not available", name)
		ret.Result = state.False
		if c.Test {
			ret.Result = state.None
			verb := "stopped"
			if up {
				verb = "started"
			}
			ret.Comment = fmt.Sprintf("Service %s not present; if created in this state run, it would have been %s", name, verb)
		} else if !up {
			ret.Result = state.True // a missing service is dead enough
		}
		return ret
	}
	before := r.status()
	beforeEnabled := r.isEnabled()
	if before == up {
		if up {
			ret.Comment = fmt.Sprintf("The service %s is already running", name)
		} else {
			ret.Comment = fmt.Sprintf("The service %s is already dead", name)
		}
		if enable != nil && *enable && !beforeEnabled {
			r.toggle(&ret, true, svcStartedNone, true)
		} else if enable != nil && !*enable && beforeEnabled {
			r.toggle(&ret, false, svcStartedNone, true)
		}
		return ret
	}
	if c.Test {
		ret.Result = state.None
		if up {
			ret.Comment = fmt.Sprintf("Service %s is set to start", name)
		} else {
			ret.Comment = fmt.Sprintf("Service %s is set to be killed", name)
		}
		return ret
	}
	verb, failed := "start", fmt.Sprintf("Service %s failed to start", name)
	if !up {
		verb, failed = "stop", fmt.Sprintf("Service %s failed to die", name)
	}
	ok, err := r.p.action(ctx, verb, name, r.noBlock)
	if err != nil && up {
		return sysFail(name, "%v", err)
	}
	if !ok {
		ret.Result = state.False
		ret.Comment = failed
		if enable != nil {
			r.toggle(&ret, *enable, svcStartedOf(!up), false)
		}
		return ret
	}
	delay, bad := svcDelay(ctx, k)
	if bad != "" {
		return sysFail(name, "%s", bad)
	}
	after := r.status()
	afterEnabled := r.isEnabled()
	if (beforeEnabled != afterEnabled || before != after) && len(ret.Changes) == 0 {
		ret.Changes[name] = after
	}
	good := after == up
	switch {
	case up && good:
		ret.Comment = fmt.Sprintf("Started service %s", name)
	case up:
		ret.Comment, ret.Result = failed, state.False
	case good:
		ret.Comment = fmt.Sprintf("Service %s was killed", name)
	default:
		ret.Comment, ret.Result = failed, state.False
	}
	if enable != nil {
		r.toggle(&ret, *enable, svcStartedOf(after), good)
	}
	if up && delay > 0 {
		ret.Comment = fmt.Sprintf("%s\nDelayed return for %s seconds", ret.Comment, svcPyNum(delay))
	}
	return ret
}

// svcEnabled is Salt's service.enabled.
func svcEnabled(ctx context.Context, c *Call) state.Ret {
	ret := state.Ret{Name: c.Name, Result: state.True, Changes: map[string]any{}}
	r, bad := newSvcRun(ctx, c)
	if bad != "" {
		return sysFail(c.Name, "%s", bad)
	}
	r.toggle(&ret, true, svcStartedNone, true)
	if c.Test && ret.Comment == fmt.Sprintf("The named service %s is not available", c.Name) {
		ret.Result = state.None
		ret.Comment = fmt.Sprintf("Service %s not present; if created in this state run, it would have been enabled", c.Name)
	}
	return ret
}

// svcDisabled is Salt's service.disabled.
func svcDisabled(ctx context.Context, c *Call) state.Ret {
	ret := state.Ret{Name: c.Name, Result: state.True, Changes: map[string]any{}}
	r, bad := newSvcRun(ctx, c)
	if bad != "" {
		return sysFail(c.Name, "%s", bad)
	}
	r.toggle(&ret, false, svcStartedNone, true)
	return ret
}

// svcModWatch is service's mod_watch: restart (or reload with reload:
// True, or start when it is not running) a service.running whose watched
// state changed; stop a service.dead.
func svcModWatch(ctx context.Context, c *Call) state.Ret {
	ret := state.Ret{Name: c.Name, Result: state.True, Changes: map[string]any{}}
	r, bad := newSvcRun(ctx, c)
	if bad != "" {
		return sysFail(c.Name, "%s", bad)
	}
	k := sysKw(c.Chunk)
	name := r.name
	var verb, past string
	switch sfun := watchFun(c); sfun {
	case "dead":
		verb, past = "stop", "stopped"
		if !r.status() {
			ret.Comment = "Service is already stopped"
			return ret
		}
	case "running":
		switch {
		case !r.status():
			verb = "start"
		case k.boolean("reload", false):
			verb = "reload"
		default:
			verb = "restart"
		}
		past = verb + "ed"
	default:
		return sysFail(name, "Unable to trigger watch for service.%s", sfun)
	}
	if c.Test {
		ret.Result = state.None
		ret.Comment = "Service is set to be " + past
		return ret
	}
	if verb == "start" {
		r.p.action(ctx, "stop", name, r.noBlock) // Salt: stop service before start
	}
	ok, err := r.p.action(ctx, verb, name, r.noBlock)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	if _, bad := svcDelay(ctx, k); bad != "" {
		return sysFail(name, "%s", bad)
	}
	ret.Changes = map[string]any{name: ok}
	ret.Result = svcResult(ok)
	if ok {
		ret.Comment = "Service " + past
	} else {
		ret.Comment = "Failed to " + verb + " the service"
	}
	return ret
}

// watchFun is the function a mod_watch call is for: the engine's "sfun"
// (Salt's mod_watch(name, sfun=...), salt/state.py call_chunk sets it and
// "fun" to mod_watch), else the chunk's own function.
func watchFun(c *Call) string {
	if s, _ := c.Chunk["sfun"].(string); s != "" {
		return s
	}
	return c.Chunk.Fun()
}
