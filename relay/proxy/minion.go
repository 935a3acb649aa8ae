package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/halite-fleet/halite/config"
)

// RetcodeGeneric is the retcode of a function that failed (Salt's
// salt.defaults.exitcodes.EX_GENERIC).
const RetcodeGeneric = 1

// maxOutput bounds what one call keeps of a device's answer (a command's
// output, an HTTP body): a device cannot make the relay hold more.
const maxOutput = 1 << 20

// Options make a Minion.
type Options struct {
	Entry   config.Proxy
	Relay   string // the relay's id: the proxied_by grain
	PkiDir  string // the relay's pki_dir: the default known_hosts is there
	Version string // test.version
	// Pillar returns the relay's pillar as last received (the agent's
	// Pillar); nil: none. password_pillar is looked up in it.
	Pillar func() map[string]any
	// HTTP is the client of the onvif and http types, shared by every
	// Minion of the relay (one pool of connections; see NewHTTPClient).
	HTTP *http.Client
}

// Result is a call's outcome, as an agent's executor reports it.
type Result struct {
	Return  any
	Retcode int
	Success bool
}

// Minion is one proxy minion. Its methods may be called concurrently.
type Minion struct {
	o   Options
	drv driver
}

// driver is a proxytype: its functions and its grains.
type driver interface {
	// call runs fun; ok false: the type has no such function.
	call(ctx context.Context, fun string, a *args) (ret any, retcode int, ok bool, err error)
	// ping is the type's test.ping (Salt's salt/modules/test.py ping
	// calls the proxy's <proxytype>.ping when running in a proxy).
	ping(ctx context.Context) bool
	// grains are what the device says of itself.
	grains(ctx context.Context) (map[string]any, error)
	functions() []string
}

// New makes the Minion of one proxy: entry.
func New(o Options) (*Minion, error) {
	m := &Minion{o: o}
	e := &o.Entry
	if o.HTTP == nil {
		o.HTTP = NewHTTPClient()
		m.o.HTTP = o.HTTP
	}
	switch e.ProxyType {
	case "ssh":
		kh := e.KnownHosts
		if kh == "" {
			kh = filepath.Join(o.PkiDir, "proxy_known_hosts")
		}
		d, err := newSSH(m, kh)
		if err != nil {
			return nil, fmt.Errorf("proxy minion %s: %w", e.ID, err)
		}
		m.drv = d
	case "onvif":
		d, err := newONVIF(m)
		if err != nil {
			return nil, fmt.Errorf("proxy minion %s: %w", e.ID, err)
		}
		m.drv = d
	case "http":
		d, err := newHTTPDevice(m)
		if err != nil {
			return nil, fmt.Errorf("proxy minion %s: %w", e.ID, err)
		}
		m.drv = d
	default:
		return nil, fmt.Errorf("proxy minion %s: unknown proxytype %q (ssh, onvif, http)", e.ID, e.ProxyType)
	}
	return m, nil
}

// NewHTTPClient returns the client the onvif and http types share. Its
// idle connections close after a few seconds, so that an idle relay holds
// none (each holds two goroutines in net/http).
func NewHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                  nil, // devices are on the site LAN: never through an HTTP proxy
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        5 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  0, // the call's context bounds it
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a device's redirect is its answer; credentials never follow it elsewhere
	}}
}

// ID is the proxy minion's id.
func (m *Minion) ID() string { return m.o.Entry.ID }

// Entry is its relay: proxy: entry.
func (m *Minion) Entry() config.Proxy { return m.o.Entry }

// Type is its proxytype.
func (m *Minion) Type() string { return m.o.Entry.ProxyType }

// Timeout is the longest one call to its device may take.
func (m *Minion) Timeout() time.Duration {
	if m.o.Entry.Timeout <= 0 {
		return 10 * time.Second
	}
	return time.Duration(m.o.Entry.Timeout) * time.Second
}

// baseGrains are the grains a proxy minion has whatever its device says:
// Salt's for a proxy (salt/grains/core.py os_data: kernel, os, os_family
// ... "proxy" when salt.utils.platform.is_proxy()), its id, proxytype and
// relay, then the entry's static grains.
func (m *Minion) baseGrains() map[string]any {
	e := &m.o.Entry
	g := map[string]any{
		"id": e.ID, "proxytype": e.ProxyType, "proxied_by": m.o.Relay, "kernel": "proxy",
		"kernelrelease": "proxy", "kernelversion": "proxy", "os": "proxy", "os_family": "proxy",
		"osrelease": "proxy", "osfullname": "proxy", "halite_version": m.o.Version,
	}
	if e.Host != "" {
		g["host"] = e.Host
	}
	if e.URL != "" {
		g["url"] = e.URL
	}
	if d, ok := m.drv.(*httpDevice); ok {
		g["host"] = d.base.Hostname()
	}
	return g
}

// Grains returns the proxy minion's grains: its base grains, what its
// device says of itself (asked within the call timeout; a device that
// does not answer adds proxy_error instead), then the entry's static
// grains, which win. It is GrainsWith(DeviceGrains(ctx)).
func (m *Minion) Grains(ctx context.Context) map[string]any {
	return m.GrainsWith(m.DeviceGrains(ctx))
}

// DeviceGrains asks the device what it says of itself, within the call
// timeout; a device that does not answer says proxy_error instead. Its
// answer is small and GrainsWith makes the whole set from it, so that a
// relay's thousand idle proxy minions need not each hold the set (a map
// of some fifteen grains: 700 bytes).
func (m *Minion) DeviceGrains(ctx context.Context) map[string]any {
	ctx, cancel := context.WithTimeout(ctx, m.Timeout())
	defer cancel()
	dg, err := m.drv.grains(ctx)
	if err != nil {
		out := make(map[string]any, len(dg)+1)
		for k, v := range dg {
			out[k] = v
		}
		out["proxy_error"] = err.Error()
		return out
	}
	return dg
}

// GrainsWith returns the proxy minion's grains, with dg as what its
// device says of itself (DeviceGrains): a new map each call.
func (m *Minion) GrainsWith(dg map[string]any) map[string]any {
	g := m.baseGrains()
	for k, v := range dg {
		g[k] = v
	}
	for k, v := range m.o.Entry.Grains {
		g[k] = v
	}
	g["id"], g["proxytype"], g["proxied_by"] = m.o.Entry.ID, m.o.Entry.ProxyType, m.o.Relay
	return g
}

// Call runs fun with its arguments against the device, within the call
// timeout (or limit, when shorter and not 0); grains are the minion's
// current grains (grains.items, grains.get). It never panics on bad input:
// an error is Salt's "ERROR: ..." return with retcode 1.
func (m *Minion) Call(ctx context.Context, fun string, arg []any, kwarg map[string]any, grains map[string]any, limit time.Duration) Result {
	timeout := m.Timeout()
	if limit > 0 && limit < timeout {
		timeout = limit
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a := newArgs(fun, arg, kwarg)
	ret, retcode, err := m.call(ctx, fun, a, grains)
	switch {
	case errors.Is(err, errNotAvailable):
		return Result{Return: fmt.Sprintf("'%s' is not available.", fun), Retcode: RetcodeGeneric}
	case err != nil && ctx.Err() != nil:
		return Result{Return: fmt.Sprintf("ERROR: %s on proxy minion %s timed out after %s: %v", fun, m.ID(), timeout, err), Retcode: RetcodeGeneric}
	case err != nil:
		return Result{Return: "ERROR: " + err.Error(), Retcode: RetcodeGeneric}
	}
	return Result{Return: ret, Retcode: retcode, Success: retcode == 0}
}

var errNotAvailable = errors.New("not available")

func (m *Minion) call(ctx context.Context, fun string, a *args, grains map[string]any) (any, int, error) {
	switch fun {
	case "test.ping":
		return m.drv.ping(ctx), 0, a.none()
	case "test.echo":
		s, err := a.str(0, "text", true)
		return s, 0, err
	case "test.version":
		return m.o.Version, 0, a.none()
	case "grains.items":
		return grains, 0, a.none()
	case "grains.get":
		key, err := a.str(0, "key", true)
		if err != nil {
			return nil, 0, err
		}
		def, _ := a.get(1, "default")
		if def == nil {
			def = ""
		}
		v, ok := lookup(grains, key)
		if !ok {
			return def, 0, nil
		}
		return v, 0, nil
	case "sys.list_functions":
		return m.Functions(), 0, nil
	}
	ret, rc, ok, err := m.drv.call(ctx, fun, a)
	if !ok {
		return nil, 0, errNotAvailable
	}
	return ret, rc, err
}

// Functions lists the functions the proxy minion has.
func (m *Minion) Functions() []string {
	fs := append([]string{"grains.get", "grains.items", "sys.list_functions", "test.echo", "test.ping", "test.version"}, m.drv.functions()...)
	sort.Strings(fs)
	return fs
}

// password is the device's password: password_pillar's value in the
// relay's pillar when it is there, else the entry's password.
func (m *Minion) password() (string, error) {
	e := &m.o.Entry
	if e.PasswordPillar != "" && m.o.Pillar != nil {
		if v, ok := lookup(m.o.Pillar(), e.PasswordPillar); ok {
			s, isStr := v.(string)
			if !isStr {
				return "", fmt.Errorf("pillar %s is a %T, not a string", e.PasswordPillar, v)
			}
			return s, nil
		}
	}
	if e.PasswordPillar != "" && e.Password == "" {
		return "", fmt.Errorf("pillar %s is not in the relay's pillar (the master compiles it for the relay: add it to the relay's pillar top)", e.PasswordPillar)
	}
	return e.Password, nil
}

// lookup walks a colon path (Salt's traverse_dict_and_list, ":"
// delimiter) through maps.
func lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ":") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// args are a call's arguments: positional, then keyword (the job's
// __pub_ keys left out).
type args struct {
	fun    string
	pos    []any
	kw     map[string]any
	onlyKw bool
}

func newArgs(fun string, arg []any, kwarg map[string]any) *args {
	a := &args{fun: fun, kw: map[string]any{}}
	for _, v := range arg {
		// Salt's publish packs key=value words into a map with
		// "__kwarg__": true.
		if m, ok := v.(map[string]any); ok && m["__kwarg__"] == true {
			for k, x := range m {
				if k != "__kwarg__" {
					a.kw[k] = x
				}
			}
			continue
		}
		a.pos = append(a.pos, v)
	}
	for k, v := range kwarg {
		if !strings.HasPrefix(k, "__") {
			a.kw[k] = v
		}
	}
	return a
}

func (a *args) get(i int, name string) (any, bool) {
	if v, ok := a.kw[name]; ok {
		return v, true
	}
	if i >= 0 && i < len(a.pos) {
		return a.pos[i], true
	}
	return nil, false
}

func (a *args) str(i int, name string, required bool) (string, error) {
	v, ok := a.get(i, name)
	if !ok || v == nil {
		if required {
			return "", fmt.Errorf("%s: missing argument %s", a.fun, name)
		}
		return "", nil
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("%s: argument %s must be a string, got %T", a.fun, name, v)
}

func (a *args) none() error {
	if len(a.pos) > 0 {
		return fmt.Errorf("%s takes no positional arguments, got %d", a.fun, len(a.pos))
	}
	return nil
}

// limited is a writer that keeps the first maxOutput bytes and counts the
// rest.
type limited struct {
	b       []byte
	dropped int
}

func (l *limited) Write(p []byte) (int, error) {
	room := maxOutput - len(l.b)
	if room >= len(p) {
		l.b = append(l.b, p...)
	} else {
		if room > 0 {
			l.b = append(l.b, p[:room]...)
		}
		l.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (l *limited) String() string {
	s := string(l.b)
	if l.dropped > 0 {
		s += fmt.Sprintf("\n[... %d more bytes not kept]", l.dropped)
	}
	return s
}
