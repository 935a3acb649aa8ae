package firmware

import (
	"archive/tar"
	"compress/gzip"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed service/halite-agent.service service/halite-agent.init files/halite-agent.procd files/install.sh
//go:embed service/halite-master.service service/halite-relay.service service/halite.logrotate
var embedded embed.FS

// ServiceFile returns one of firmware/service's files (halite-agent.service,
// halite-master.service, halite-relay.service, halite-agent.init,
// halite.logrotate) or files/halite-agent.procd, by base name, for the
// packages firmware/pkg makes.
func ServiceFile(name string) ([]byte, error) {
	if name == "halite-agent.procd" {
		return embedded.ReadFile("files/" + name)
	}
	b, err := embedded.ReadFile("service/" + name)
	if err != nil {
		return nil, fmt.Errorf("service file %q: %w", name, err)
	}
	return b, nil
}

// InstallScript is install.sh: the POSIX installer that a bundle carries
// and that halite-flash ssh runs on each device.
func InstallScript() []byte { return mustRead("files/install.sh") }

func mustRead(name string) []byte {
	b, err := embedded.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time
	}
	return b
}

// InitScripts are the agent's init scripts by bundle file name: a systemd
// unit and a SysV/BusyBox script (firmware/service, as installed on
// gateways) and an OpenWrt procd script. install.sh installs the one for
// the init system it finds, with its paths rewritten.
func InitScripts() map[string][]byte {
	return map[string][]byte{
		"init/halite-agent.service": mustRead("service/halite-agent.service"),
		"init/halite-agent.init":    mustRead("service/halite-agent.init"),
		"init/halite-agent.procd":   mustRead("files/halite-agent.procd"),
	}
}

// DefaultMasterPort is the master's port when --master names none.
const DefaultMasterPort = 4506

// Endpoint is a host and port the agent connects to.
type Endpoint struct {
	Host string
	Port int
}

// ParseEndpoint reads HOST, HOST:PORT or [V6]:PORT.
func ParseEndpoint(s string, defPort int) (Endpoint, error) {
	host, port := s, defPort
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Endpoint{}, fmt.Errorf("%q: bad port %q", s, p)
		}
		host, port = h, n
	} else if strings.Count(s, ":") == 1 {
		return Endpoint{}, fmt.Errorf("%q: %w", s, err)
	}
	host = strings.Trim(host, "[]")
	if host == "" || strings.ContainsAny(host, " \t\r\n\"'#/\\") {
		return Endpoint{}, fmt.Errorf("%q is not a host name or address", s)
	}
	if port == 0 {
		return Endpoint{}, fmt.Errorf("%q: give a port (HOST:PORT)", s)
	}
	return Endpoint{host, port}, nil
}

// Profile is what every device of a bundle or a flashing run gets: where it
// connects and which master key it pins.
type Profile struct {
	Master       Endpoint
	Relay        *Endpoint // devices behind a site relay connect to it
	MasterFinger string    // pinned: never trust on first use on a shipped device
	RelayFinger  string    // "": the relay's key is pinned on first use (it is not trusted with identity)
	IDFrom       string    // hostname, mac or file:PATH (install.sh)
}

// CheckIDFrom checks an --id-from value.
func CheckIDFrom(s string) error {
	switch {
	case s == "hostname" || s == "mac":
		return nil
	case strings.HasPrefix(s, "file:") && strings.HasPrefix(s[5:], "/") && !strings.ContainsAny(s, " '\"$`\\"):
		return nil
	}
	return fmt.Errorf("--id-from %q: want hostname, mac or file:/ABSOLUTE/PATH", s)
}

// AgentConfig is the agent's configuration file (CONFIG_DIR/agent) for p;
// install.sh appends the device's id (and root_dir under --root).
func (p Profile) AgentConfig(arch string) []byte {
	var b strings.Builder
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) } // JSON strings are YAML
	fmt.Fprintf(&b, "# Written by halite-flash for %s devices.\n", arch)
	to := p.Master
	if p.Relay != nil {
		to = *p.Relay
		fmt.Fprintf(&b, "# Through the site relay %s:%d to the master %s.\n", p.Relay.Host, p.Relay.Port, p.Master.Host)
	}
	fmt.Fprintf(&b, "master: %s\nmaster_port: %d\n", q(to.Host), to.Port)
	fmt.Fprintf(&b, "master_finger: %s\n", q(p.MasterFinger))
	if p.RelayFinger != "" {
		fmt.Fprintf(&b, "relay_finger: %s\n", q(p.RelayFinger))
	}
	return []byte(b.String())
}

// File is one file of a bundle: Data, or the file at Path.
type File struct {
	Name string
	Mode os.FileMode
	Data []byte
	Path string
}

// Bundle is what is installed on a device: the agent for one architecture,
// its configuration, the init scripts, install.sh and, when preseeded, the
// devices' key pairs (whose public keys the master has accepted).
type Bundle struct {
	Arch    Arch
	Profile Profile
	Agent   string               // path of the agent binary
	Keys    map[string]DeviceKey // preseeded, by id
}

// Files lists the bundle's files, in a stable order.
func (b *Bundle) Files() []File {
	idFrom := b.Profile.IDFrom
	if idFrom == "" {
		idFrom = "hostname"
	}
	fs := []File{
		{Name: "install.sh", Mode: 0o755, Data: InstallScript()},
		{Name: "bundle.env", Mode: 0o644, Data: []byte(fmt.Sprintf("# Read by install.sh.\nARCH=%s\nID_FROM='%s'\n", b.Arch.Name, idFrom))},
		{Name: "agent", Mode: 0o644, Data: b.Profile.AgentConfig(b.Arch.Name)},
		{Name: "halite-agent", Mode: 0o755, Path: b.Agent},
	}
	init := InitScripts()
	for _, n := range sortedKeys(init) {
		fs = append(fs, File{Name: n, Mode: 0o644, Data: init[n]})
	}
	for _, id := range sortedKeys(b.Keys) {
		k := b.Keys[id]
		fs = append(fs, File{Name: "keys/" + id + ".pem", Mode: 0o600, Data: k.PrivPEM},
			File{Name: "keys/" + id + ".pub", Mode: 0o644, Data: k.PubPEM()})
	}
	return fs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteDir writes the bundle's files under dir (made if missing).
func (b *Bundle) WriteDir(dir string) error {
	for _, f := range b.Files() {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write bundle: %w", err)
		}
		data := f.Data
		if f.Path != "" {
			var err error
			if data, err = os.ReadFile(f.Path); err != nil {
				return fmt.Errorf("write bundle: %w", err)
			}
		}
		if err := os.WriteFile(p, data, f.Mode); err != nil {
			return fmt.Errorf("write bundle: %w", err)
		}
		if err := os.Chmod(p, f.Mode); err != nil {
			return fmt.Errorf("write bundle: %w", err)
		}
	}
	return nil
}

// WriteTarGz writes the bundle as a gzipped tar whose files sit under
// top/ (so `tar xzf` makes one directory).
func (b *Bundle) WriteTarGz(w io.Writer, top string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	now := time.Now()
	dirs := map[string]bool{}
	for _, f := range b.Files() {
		name := top + "/" + f.Name
		if d := filepath.ToSlash(filepath.Dir(name)); d != "." {
			for _, part := range parents(d) {
				if dirs[part+"/"] {
					continue
				}
				dirs[part+"/"] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: part + "/", Mode: 0o755, ModTime: now}); err != nil {
					return err
				}
			}
		}
		data := f.Data
		if f.Path != "" {
			var err error
			if data, err = os.ReadFile(f.Path); err != nil {
				return fmt.Errorf("write bundle: %w", err)
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(f.Mode), Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// parents lists d's ancestors and d, outermost first ("a", "a/b").
func parents(d string) []string {
	parts := strings.Split(d, "/")
	out := make([]string, len(parts))
	for i := range parts {
		out[i] = strings.Join(parts[:i+1], "/")
	}
	return out
}
