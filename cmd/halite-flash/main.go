// Command halite-flash puts the Halite agent onto devices:
//
//	halite-flash bundle --arch ARCH --master HOST[:PORT] [--relay HOST:PORT] [--id-from hostname|mac|file:PATH]
//	                    [--preseed N [--id-prefix P]] [--out DIR|FILE.tar.gz] [--agent-binary PATH | --dist DIR]
//	halite-flash ssh --master HOST[:PORT] [--inventory FILE | --from-discovery FILTER | HOST...] [--user U]
//	                 [--key FILE | --password-env VAR] [-j 50] [--known-hosts FILE] [--accept-new-hostkeys]
//	                 [--dry-run] [--out json] [--state FILE]
//	halite-flash package --format deb|ipk --kind agent|master|relay --arch ARCH --version V [--bin DIR] [-o DIR]
//
// Both pin the master's key in the agent's configuration (master_finger, read
// from the master's pki_dir or asked of the running master: never learnt
// from the network), and both make the master accept the devices' keys
// without a pending step: bundle --preseed makes key pairs on this side
// (Salt's preseeded keys); ssh reads the device's key over the
// authenticated session, or makes one and sends it there. package makes
// the system packages (.deb for gateways and relay VMs, .ipk for OpenWrt)
// from make cross's binaries (firmware/pkg).
package main

import (
	"context"
	"encoding/json"

	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/crypto/ssh"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/firmware"
	"github.com/halite-fleet/halite/firmware/flash"
	"github.com/halite-fleet/halite/firmware/pkg"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/version"
)

// common are the options of both subcommands.
type common struct {
	configDir   string // the master's configuration directory
	masterPKI   string
	master      string
	relay       string
	relayFinger string
	idFrom      string
	agentBinary string
	dist        string
}

type bundleOpts struct {
	common
	arch     string
	preseed  int
	idPrefix string
	out      string
}

type sshOpts struct {
	common
	inventory   string
	discovery   string         // --from-discovery FILTER
	filter      map[string]any // discovery.list's arguments, from discovery
	hosts       []string
	user        string
	keyFile     string
	passwordEnv string
	jobs        int
	knownHosts  string
	acceptNew   bool
	dryRun      bool
	out         string
	state       string
	root        string
	binDir      string
	init        string
	arch        string
	replaceKeys bool
	timeout     time.Duration
}

func main() { os.Exit(Main()) }

const usage = `halite-flash bundle|ssh|package [flags]  (halite-flash bundle --help, halite-flash ssh --help, halite-flash package --help)`

// Main runs the command with os.Args and returns its exit status.
func Main() int {
	args := os.Args[1:]
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, "Usage: "+usage)
		if len(args) == 0 {
			return cli.ExitUsage
		}
		return 0
	}
	var fs *pflag.FlagSet
	var err error
	ctx, stop := cli.SignalContext()
	defer stop()
	switch args[0] {
	case "bundle":
		var o bundleOpts
		fs = bundleFlags(&o)
		if err = cli.ParseFlags(fs, args[1:]); err == nil {
			err = o.check(fs)
		}
		if err == nil {
			err = runBundle(ctx, o, os.Stdout)
		}
	case "ssh":
		var o sshOpts
		fs = sshFlags(&o)
		if err = cli.ParseFlags(fs, args[1:]); err == nil {
			err = o.check(fs)
		}
		if err == nil {
			err = runSSH(ctx, o, os.Stdout, os.Stderr)
		}
	case "package":
		var o packageOpts
		fs = packageFlags(&o)
		if err = cli.ParseFlags(fs, args[1:]); err == nil {
			err = o.check(fs)
		}
		if err == nil {
			err = runPackage(o, os.Stdout)
		}
	case "--version", "-V":
		fs = pflag.NewFlagSet("halite-flash", pflag.ContinueOnError)
		vf := cli.AddVersionFlags(fs)
		if err = cli.ParseFlags(fs, args); err == nil {
			err = vf.Print("halite-flash", os.Stdout)
		}
	default:
		err = cli.Usagef("unknown subcommand %q: %s", args[0], usage)
	}
	return cli.Exit("halite-flash", err, fs, os.Stderr)
}

func addCommon(fs *pflag.FlagSet, c *common) {
	fs.StringVarP(&c.configDir, "config-dir", "c", cli.DefaultConfigDir, "the master's configuration directory (its pki_dir and socket)")
	fs.StringVar(&c.masterPKI, "master-pki", "", "the master's pki_dir (default: the master configuration's); keys are written there when no master runs")
	fs.StringVar(&c.master, "master", "", "the master the agents connect to: HOST[:PORT] (required)")
	fs.StringVar(&c.relay, "relay", "", "the site relay the agents connect through: HOST:PORT")
	fs.StringVar(&c.relayFinger, "relay-finger", "", "the relay's key fingerprint to pin (default: pinned on first use; the relay is not trusted with identity)")
	fs.StringVar(&c.idFrom, "id-from", "hostname", "where a device's id comes from: hostname, mac or file:PATH (on the device)")
	fs.StringVar(&c.agentBinary, "agent-binary", "", "the agent binary to install (default: built from source with the Makefile's cross flags)")
	fs.StringVar(&c.dist, "dist", "", "a make cross output directory (DIR/linux-ARCH/halite-agent)")
}

func bundleFlags(o *bundleOpts) *pflag.FlagSet {
	fs := pflag.NewFlagSet("halite-flash bundle --arch ARCH --master HOST[:PORT] [--relay HOST:PORT] [--id-from hostname|mac|file:PATH] [--preseed N] [--out DIR|FILE.tar.gz]", pflag.ContinueOnError)
	addCommon(fs, &o.common)
	fs.StringVar(&o.arch, "arch", "", "the devices' architecture: "+firmware.ArchNames()+" (required)")
	fs.IntVar(&o.preseed, "preseed", 0, "make N device key pairs here and have the master accept them (ids PREFIX-001...)")
	fs.StringVar(&o.idPrefix, "id-prefix", "device", "the id prefix of preseeded keys")
	fs.StringVarP(&o.out, "out", "o", "", "the bundle: a directory, or FILE.tar.gz (default: halite-agent-ARCH)")
	return fs
}

func sshFlags(o *sshOpts) *pflag.FlagSet {
	fs := pflag.NewFlagSet("halite-flash ssh --master HOST[:PORT] [--inventory FILE | --from-discovery FILTER | HOST...] [--user U] [--key FILE | --password-env VAR] [-j N] [--dry-run] [--out json]", pflag.ContinueOnError)
	addCommon(fs, &o.common)
	home, _ := os.UserHomeDir()
	fs.StringVarP(&o.inventory, "inventory", "i", "", "devices, one a line: HOST[:PORT] [id=ID] [user=U] [arch=ARCH]")
	fs.StringVar(&o.discovery, "from-discovery", "", "flash the devices the relays found (discovery.list) that match KEY=GLOB terms, ANDed: "+strings.Join(firmware.DiscoveryKeys, ", ")+" (unmanaged=True unless given)")
	fs.StringVarP(&o.user, "user", "u", "root", "SSH user")
	fs.StringVar(&o.keyFile, "key", "", "SSH private key file")
	fs.StringVar(&o.passwordEnv, "password-env", "", "name of the environment variable holding the SSH password")
	fs.IntVarP(&o.jobs, "jobs", "j", 50, "devices flashed at once")
	fs.StringVar(&o.knownHosts, "known-hosts", filepath.Join(home, ".ssh", "known_hosts"), "known_hosts file the devices' host keys are checked against")
	fs.BoolVar(&o.acceptNew, "accept-new-hostkeys", false, "record the host key of a device seen for the first time (a changed key is still refused)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "connect and probe, say what would be done, change nothing")
	fs.StringVar(&o.out, "out", "", "json: print the results as JSON")
	fs.StringVar(&o.state, "state", "halite-flash.state", "state file: devices done are recorded there and skipped next time (\"\" for none)")
	fs.StringVar(&o.root, "install-root", "", "install under this directory of each device instead of / (tests, images)")
	fs.StringVar(&o.binDir, "bin-dir", "/usr/bin", "where the agent binary goes on the devices")
	fs.StringVar(&o.init, "init", "", "the devices' init system, instead of detecting it: systemd, procd, sysv, none")
	fs.StringVar(&o.arch, "arch", "", "the devices' architecture, instead of detecting it")
	fs.BoolVar(&o.replaceKeys, "replace-keys", false, "replace a key the master holds for a device's id by the device's")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "time allowed for one device")
	return fs
}

func (c *common) check() error {
	if c.master == "" {
		return cli.Usagef("--master HOST[:PORT] is required")
	}
	if _, err := firmware.ParseEndpoint(c.master, firmware.DefaultMasterPort); err != nil {
		return cli.Usagef("--master %v", err)
	}
	if c.relay != "" {
		if _, err := firmware.ParseEndpoint(c.relay, 0); err != nil {
			return cli.Usagef("--relay %v", err)
		}
	}
	if err := firmware.CheckIDFrom(c.idFrom); err != nil {
		return cli.Usagef("%v", err)
	}
	if c.agentBinary != "" && c.dist != "" {
		return cli.Usagef("give --agent-binary or --dist, not both")
	}
	return nil
}

func (o *bundleOpts) check(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if o.arch == "" {
		return cli.Usagef("--arch is required: %s", firmware.ArchNames())
	}
	if _, err := firmware.LookupArch(o.arch); err != nil {
		return cli.Usagef("--arch: %v", err)
	}
	if o.preseed < 0 || o.preseed > 100000 {
		return cli.Usagef("--preseed %d: want 0 to 100000", o.preseed)
	}
	return o.common.check()
}

func (o *sshOpts) check(fs *pflag.FlagSet) error {
	o.hosts = fs.Args()
	sources := 0
	for _, given := range []bool{o.inventory != "", len(o.hosts) > 0, fs.Changed("from-discovery")} {
		if given {
			sources++
		}
	}
	if sources != 1 {
		return cli.Usagef("give --inventory FILE, --from-discovery FILTER or hosts, one of the three")
	}
	if fs.Changed("from-discovery") {
		f, err := firmware.ParseDiscoveryFilter(o.discovery)
		if err != nil {
			return cli.Usagef("--from-discovery: %v", err)
		}
		o.filter = f
	}
	if o.keyFile == "" && o.passwordEnv == "" {
		return cli.Usagef("give --key FILE or --password-env VAR")
	}
	if o.passwordEnv != "" && os.Getenv(o.passwordEnv) == "" {
		return cli.Usagef("--password-env %s: that variable is empty or not set", o.passwordEnv)
	}
	if o.jobs < 1 || o.jobs > 1000 {
		return cli.Usagef("-j %d: want 1 to 1000", o.jobs)
	}
	if o.out != "" && o.out != "json" {
		return cli.Usagef("--out %q: only json", o.out)
	}
	switch o.init {
	case "", "systemd", "procd", "sysv", "none":
	default:
		return cli.Usagef("--init %q: want systemd, procd, sysv or none", o.init)
	}
	if o.arch != "" {
		if _, err := firmware.LookupArch(o.arch); err != nil {
			return cli.Usagef("--arch: %v", err)
		}
	}
	if o.root != "" && !filepath.IsAbs(o.root) {
		return cli.Usagef("--install-root %q: give an absolute path", o.root)
	}
	if !filepath.IsAbs(o.binDir) {
		return cli.Usagef("--bin-dir %q: give an absolute path", o.binDir)
	}
	return o.common.check()
}

// setup finds the master (its pki_dir and socket) and the devices' profile.
func (c *common) setup(ctx context.Context) (*firmware.Master, firmware.Profile, firmware.Source, error) {
	m := &firmware.Master{PkiDir: c.masterPKI}
	cfg, err := config.LoadMaster(c.configDir, func(config.Warning) {})
	switch {
	case err == nil:
		m.Socket = cfg.SocketPath()
		if m.PkiDir == "" {
			m.PkiDir = cfg.PkiDir
		}
	case c.masterPKI == "":
		return nil, firmware.Profile{}, firmware.Source{}, fmt.Errorf("read the master's configuration (for its key and socket): %w; or give --master-pki", err)
	}
	fp, err := m.Finger(ctx)
	if err != nil {
		return nil, firmware.Profile{}, firmware.Source{}, err
	}
	p := firmware.Profile{MasterFinger: fp, RelayFinger: c.relayFinger, IDFrom: c.idFrom}
	p.Master, _ = firmware.ParseEndpoint(c.master, firmware.DefaultMasterPort)
	if c.relay != "" {
		r, _ := firmware.ParseEndpoint(c.relay, 0)
		p.Relay = &r
	}
	src := firmware.Source{Binary: c.agentBinary, Dist: c.dist}
	if version.Version != "devel" {
		src.Version = version.Version // an agent built here says the flasher's version
	}
	return m, p, src, nil
}

func runBundle(ctx context.Context, o bundleOpts, stdout io.Writer) error {
	m, p, src, err := o.setup(ctx)
	if err != nil {
		return err
	}
	arch, _ := firmware.LookupArch(o.arch)
	bin, err := src.AgentBinary(ctx, arch)
	if err != nil {
		return err
	}
	b := &firmware.Bundle{Arch: arch, Profile: p, Agent: bin, Keys: map[string]firmware.DeviceKey{}}
	width := len(fmt.Sprint(o.preseed))
	width = max(width, 3)
	for i := 1; i <= o.preseed; i++ {
		id := fmt.Sprintf("%s-%0*d", o.idPrefix, width, i)
		k, err := m.Enrol(ctx, id, nil, false)
		if err != nil {
			return fmt.Errorf("preseed %s: %w", id, err)
		}
		b.Keys[id] = k
	}
	out := o.out
	if out == "" {
		out = "halite-agent-" + arch.Name
	}
	if strings.HasSuffix(out, ".tar.gz") || strings.HasSuffix(out, ".tgz") {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		top := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(out), ".tar.gz"), ".tgz")
		if err := b.WriteTarGz(f, top); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", out, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
	} else if err := b.WriteDir(out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: agent for %s, master %s:%d pinned (%s)", out, arch.Name, p.Master.Host, p.Master.Port, p.MasterFinger)
	if o.preseed > 0 {
		fmt.Fprintf(stdout, ", %d preseeded keys accepted (%s .. %s)", o.preseed, fmt.Sprintf("%s-%0*d", o.idPrefix, width, 1), fmt.Sprintf("%s-%0*d", o.idPrefix, width, o.preseed))
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "on each device: sh install.sh [--id ID]   (as root, from the unpacked bundle)")
	return nil
}

func runSSH(ctx context.Context, o sshOpts, stdout, stderr io.Writer) error {
	var targets []flash.Target
	switch {
	case o.filter != nil: // after setup, which finds the master
	case o.inventory != "":
		f, err := os.Open(o.inventory)
		if err != nil {
			return err
		}
		targets, err = flash.ParseInventory(f, o.inventory)
		f.Close()
		if err != nil {
			return err
		}
	default:
		for _, h := range o.hosts {
			targets = append(targets, flash.Target{Addr: h})
		}
	}
	m, p, src, err := o.setup(ctx)
	if err != nil {
		return err
	}
	if o.filter != nil {
		if targets, err = discoveryTargets(ctx, m, o.discovery, o.filter, stderr); err != nil {
			return err
		}
	}
	fo := flash.Options{
		User: o.user, KnownHosts: o.knownHosts, AcceptNew: o.acceptNew, Jobs: o.jobs, DryRun: o.dryRun,
		Timeout: o.timeout, Root: o.root, BinDir: o.binDir, Init: o.init, ReplaceKeys: o.replaceKeys,
		Profile: p, Source: src, Master: m,
	}
	if !o.dryRun {
		fo.StateFile = o.state
	}
	if o.keyFile != "" {
		b, err := os.ReadFile(o.keyFile)
		if err != nil {
			return err
		}
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return fmt.Errorf("--key %s: %w (a passphrase-protected key: use ssh-agent's key without a passphrase copy, or --password-env)", o.keyFile, err)
		}
		fo.Signers = []ssh.Signer{s}
	}
	if o.passwordEnv != "" {
		fo.Password = os.Getenv(o.passwordEnv)
	}
	if o.arch != "" {
		for i := range targets {
			if targets[i].Arch == "" {
				targets[i].Arch = o.arch
			}
		}
	}
	if isTerminal(stderr) {
		fo.Progress = progress(stderr)
	}
	results, err := flash.Run(ctx, fo, targets)
	if err != nil {
		return err
	}
	if fo.Progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	failed := 0
	for _, r := range results {
		if r.Status == flash.StatusFailed {
			failed++
		}
	}
	if o.out == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "    ")
		if err := enc.Encode(map[string]any{"results": results, "summary": summary(results)}); err != nil {
			return err
		}
	} else {
		printTable(stdout, results)
	}
	if failed > 0 {
		return &cli.ExitError{Code: 1}
	}
	return nil
}

func summary(rs []flash.Result) map[string]int {
	s := map[string]int{"total": len(rs)}
	for _, r := range rs {
		s[r.Status]++
	}
	return s
}

func printTable(w io.Writer, rs []flash.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tID\tARCH\tINIT\tSTATUS\tTIME\tDETAIL")
	for _, r := range rs {
		d := r.Detail
		switch {
		case r.Error != "":
			d = r.Kind + ": " + r.Error
		case r.Status == flash.StatusOK:
			d = "key " + r.Finger + " accepted"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1fs\t%s\n", r.Addr, dash(r.ID), dash(r.Arch), dash(r.Init), r.Status, r.Seconds, d)
	}
	tw.Flush()
	s := summary(rs)
	fmt.Fprintf(w, "%d devices: %d ok, %d failed, %d skipped (done before), %d dry-run\n", s["total"], s[flash.StatusOK], s[flash.StatusFailed], s[flash.StatusSkipped], s[flash.StatusDryRun])
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress draws one line on the terminal: a bar and the counts.
func progress(w io.Writer) func(done, total int, r flash.Result) {
	var ok, failed int
	return func(done, total int, r flash.Result) {
		switch r.Status {
		case flash.StatusFailed:
			failed++
		default:
			ok++
		}
		const width = 30
		n := done * width / max(total, 1)
		fmt.Fprintf(w, "\r\033[K[%s%s] %d/%d  ok %d  failed %d  last: %s %s", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total, ok, failed, r.Addr, r.Status)
	}
}

type packageOpts struct {
	format     string
	kind       string
	arch       string
	version    string
	bin        string
	out        string
	maintainer string
	pkgArch    string
}

func packageFlags(o *packageOpts) *pflag.FlagSet {
	fs := pflag.NewFlagSet("halite-flash package --format deb|ipk --kind agent|master|relay --arch ARCH --version V [--bin DIR] [-o DIR]", pflag.ContinueOnError)
	fs.StringVar(&o.format, "format", "", "deb (gateways, relay VMs, the master) or ipk (OpenWrt; the agent only) (required)")
	fs.StringVar(&o.kind, "kind", "agent", "agent, master (with halite, halite-key, halite-run, halite-flash) or relay (.deb; needs halite-agent)")
	fs.StringVar(&o.arch, "arch", "", "the architecture: "+firmware.ArchNames()+" (required)")
	fs.StringVar(&o.version, "version", "", "the version: 1.2.3, v1.2.3 or a git describe such as v1.2-3-gabc1234 (-> 1.2+3.gabc1234) (required)")
	fs.StringVar(&o.bin, "bin", "", "the directory of the binaries (default: dist/linux-ARCH, make cross's)")
	fs.StringVarP(&o.out, "out", "o", ".", "the directory the package is written to")
	fs.StringVar(&o.maintainer, "maintainer", pkg.DefaultMaintainer, "the Maintainer field: NAME <EMAIL>")
	fs.StringVar(&o.pkgArch, "pkg-arch", "", "the package's architecture instead of the default for --arch (armhf, arm_cortex-a9_vfpv3-d16, ...; opkg print-architecture on a device)")
	return fs
}

func (o *packageOpts) spec() pkg.Spec {
	arch, _ := firmware.LookupArch(o.arch)
	bin := o.bin
	if bin == "" {
		bin = filepath.Join("dist", "linux-"+o.arch)
	}
	return pkg.Spec{Format: o.format, Kind: o.kind, Arch: arch, Version: o.version, BinDir: bin, Maintainer: o.maintainer, PkgArch: o.pkgArch}
}

func (o *packageOpts) check(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case o.format == "":
		return cli.Usagef("--format is required: deb or ipk")
	case o.arch == "":
		return cli.Usagef("--arch is required: %s", firmware.ArchNames())
	case o.version == "":
		return cli.Usagef("--version is required (make packages gives git describe's)")
	}
	if _, err := firmware.LookupArch(o.arch); err != nil {
		return cli.Usagef("--arch: %v", err)
	}
	if err := o.spec().Check(); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

func runPackage(o packageOpts, stdout io.Writer) error {
	r, err := pkg.Build(o.spec(), o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s %s for %s, %.2f MiB\n", r.Path, r.Name, r.Version, r.Arch, float64(r.Size)/(1<<20))
	return nil
}

// discoveryTargets asks the running master which devices of the relays'
// inventories match filter (--from-discovery's text is given for the
// messages) and says on stderr which it takes. No device matching is an
// error: a typo in a filter must not look like a flashed site.
func discoveryTargets(ctx context.Context, m *firmware.Master, text string, filter map[string]any, stderr io.Writer) ([]flash.Target, error) {
	devs, skipped, err := m.Discovered(ctx, filter)
	if err != nil {
		return nil, err
	}
	if skipped > 0 {
		fmt.Fprintf(stderr, "halite-flash: %d matching devices have no usable IP address in their record: left out\n", skipped)
	}
	if len(devs) == 0 {
		how := "halite-run discovery.list shows the inventories"
		if filter["unmanaged"] == true {
			how += "; devices already running an accepted agent are left out unless the filter says unmanaged=False"
		}
		return nil, fmt.Errorf("--from-discovery %q: no device of the relays' inventories matches (%s)", text, how)
	}
	targets := make([]flash.Target, 0, len(devs))
	for _, d := range devs {
		fmt.Fprintf(stderr, "halite-flash: from relay %s: %s (%s) %s %s\n", d.Relay, d.Addr, d.Key, dash(d.Vendor), dash(d.Model))
		targets = append(targets, flash.Target{Addr: d.Addr})
	}
	return targets, nil
}
