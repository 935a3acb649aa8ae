package engines

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/targets"
)

// maxLine bounds one JSON line from an engine process.
const maxLine = 1 << 20

// The script engine (Salt's script engine): runs a command and turns each
// JSON line it prints into an event. When the command exits with status 0
// it is run again after interval; any other exit is a failure, and the
// engine is restarted with backoff.
//
//	engines:
//	  - script:
//	      cmd: /usr/local/bin/poll-cameras --site north
//	      interval: 10          # seconds between runs of a command that exits 0
//	      events: ['salt/beacon/*']   # events written to its stdin, optional
//	      env: {SITE: north}
//	      cwd: /var/lib/poller
//
// The lines, one JSON object each (Halite's JSON-lines engine protocol):
//
//	out {"tag": "site/camera/12/up", "data": {"ip": "10.0.0.12"}}   fire an event (to the master from an agent)
//	out {"log": "polled 40 cameras", "level": "info"}               log through the daemon
//	out {"call": "test.ping", "args": [], "kwargs": {}, "id": 1}    run an execution function (agent)
//	in  {"id": 1, "return": true}                                   its answer (or "error")
//	in  {"tag": "salt/beacon/cam1/load/", "data": {...}}            an event matching events
//
// A line that is not such an object is logged and skipped.
func init() {
	Register("script", func(o *Opts) (Engine, error) {
		p, err := processFromOpts(o)
		if err != nil {
			return nil, err
		}
		return p, nil
	})
}

// Process is an engine run as a child process speaking JSON lines: the
// script engine, and user engines that are executables.
type Process struct {
	Argv     []string // argv[0] is the program
	Shell    bool     // run Argv[0] with /bin/sh -c
	Env      map[string]string
	Dir      string
	Events   []string      // tag globs written to stdin
	Interval time.Duration // wait before running again after exit 0
	Opts     map[string]any
}

func processFromOpts(o *Opts) (*Process, error) {
	p := &Process{}
	v, ok := o.Take("cmd")
	switch x := v.(type) {
	case string:
		if strings.TrimSpace(x) == "" {
			return nil, fmt.Errorf("option cmd is empty")
		}
		p.Argv, p.Shell = []string{x}, true
	case []any:
		for _, it := range x {
			s, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("option cmd: expected a string or a list of strings, got an item %v", it)
			}
			p.Argv = append(p.Argv, s)
		}
		if len(p.Argv) == 0 {
			return nil, fmt.Errorf("option cmd is empty")
		}
	default:
		if !ok {
			return nil, fmt.Errorf("option cmd is required")
		}
		return nil, fmt.Errorf("option cmd: expected a string or a list of strings, got %v", v)
	}
	if !p.Shell {
		if _, err := osexec.LookPath(p.Argv[0]); err != nil {
			return nil, fmt.Errorf("option cmd: %w", err)
		}
	}
	var err error
	if p.Interval, err = o.Seconds("interval", time.Second); err != nil {
		return nil, err
	}
	if p.Events, err = o.Strings("events", nil); err != nil {
		return nil, err
	}
	if p.Dir, err = o.String("cwd", ""); err != nil {
		return nil, err
	}
	if _, err := o.String("output", "json"); err != nil {
		return nil, err
	}
	if o.m["output"] != nil && o.m["output"] != "json" {
		return nil, fmt.Errorf("option output: only json is supported, got %v", o.m["output"])
	}
	env, err := o.Map("env")
	if err != nil {
		return nil, err
	}
	p.Env = map[string]string{}
	for k, v := range env {
		p.Env[k] = fmt.Sprint(v)
	}
	return p, nil
}

// Run runs the command until ctx ends, again after each clean exit.
func (p *Process) Run(ctx context.Context, env *Env) error {
	for {
		if err := p.runOnce(ctx, env); err != nil || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(p.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (p *Process) runOnce(ctx context.Context, env *Env) error {
	var cmd *osexec.Cmd
	if p.Shell {
		cmd = osexec.CommandContext(ctx, "/bin/sh", "-c", p.Argv[0])
	} else {
		cmd = osexec.CommandContext(ctx, p.Argv[0], p.Argv[1:]...)
	}
	ownGroup(cmd)
	cmd.Dir = p.Dir
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+p.Env[k])
	}
	optsJSON, _ := json.Marshal(jsonSafe(p.Opts))
	cmd.Env = append(cmd.Env, "HALITE_ENGINE="+env.Name, "HALITE_ROLE="+env.Role, "HALITE_ID="+env.ID,
		"HALITE_ENGINE_OPTS="+string(optsJSON))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("engine stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("engine stdout: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("engine stderr: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Argv[0], err)
	}
	w := &lineWriter{w: stdin}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	if len(p.Events) > 0 && env.Bus != nil {
		sub := env.Bus.Subscribe("*", 4096)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				select {
				case <-stop:
					return
				case ev, ok := <-sub.C():
					if !ok {
						return
					}
					if matchAny(p.Events, ev.Tag) {
						if w.write(map[string]any{"tag": ev.Tag, "data": jsonSafe(ev.Data)}) != nil {
							return
						}
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), maxLine)
		for sc.Scan() {
			env.Log.Warn("engine stderr", zap.String("line", sc.Text()))
		}
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		p.line(ctx, env, w, sc.Bytes(), &wg)
	}
	scanErr := sc.Err()
	if scanErr != nil {
		// A line too long: stop reading, so the process is ended below.
		cmd.Cancel()
		io.Copy(io.Discard, stdout)
	}
	werr := cmd.Wait()
	killGroup(cmd)
	close(stop)
	w.close()
	wg.Wait()
	switch {
	case ctx.Err() != nil:
		return nil
	case scanErr != nil:
		return fmt.Errorf("read engine output: %w", scanErr)
	case werr != nil:
		var ee *osexec.ExitError
		if errors.As(werr, &ee) {
			return fmt.Errorf("%s exited: %s", p.Argv[0], ee.ProcessState)
		}
		return fmt.Errorf("%s: %w", p.Argv[0], werr)
	}
	return nil
}

// line handles one line the process printed.
func (p *Process) line(ctx context.Context, env *Env, w *lineWriter, b []byte, wg *sync.WaitGroup) {
	var msg struct {
		Tag    *string        `json:"tag"`
		Data   map[string]any `json:"data"`
		Log    *string        `json:"log"`
		Level  string         `json:"level"`
		Call   string         `json:"call"`
		Args   []any          `json:"args"`
		Kwargs map[string]any `json:"kwargs"`
		ID     any            `json:"id"`
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		env.Log.Warn("engine printed a line that is not a JSON object; skipped", zap.ByteString("line", truncate(b)), zap.Error(err))
		return
	}
	switch {
	case msg.Tag != nil:
		if *msg.Tag == "" {
			env.Log.Warn("engine event with an empty tag; skipped")
			return
		}
		if msg.Data == nil {
			msg.Data = map[string]any{}
		}
		if err := env.FireMaster(*msg.Tag, msg.Data); err != nil {
			env.Log.Warn("engine event not sent", zap.String("tag", *msg.Tag), zap.Error(err))
		}
	case msg.Log != nil:
		logAt(env.Log, msg.Level, *msg.Log)
	case msg.Call != "":
		id := msg.ID
		if env.Call == nil {
			w.write(map[string]any{"id": id, "error": "execution functions are not available on the " + env.Role})
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ret, err := env.Call(ctx, msg.Call, msg.Args, msg.Kwargs)
			if err != nil {
				w.write(map[string]any{"id": id, "error": err.Error()})
				return
			}
			w.write(map[string]any{"id": id, "return": jsonSafe(ret)})
		}()
	default:
		env.Log.Warn("engine line has none of tag, log or call; skipped", zap.ByteString("line", truncate(b)))
	}
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

func logAt(log *zap.Logger, level, msg string) {
	switch strings.ToLower(level) {
	case "debug", "trace":
		log.Debug(msg)
	case "warning", "warn":
		log.Warn(msg)
	case "error", "critical":
		log.Error(msg)
	default:
		log.Info(msg)
	}
}

// lineWriter writes JSON lines to the process's stdin, one at a time.
type lineWriter struct {
	mu     sync.Mutex
	w      io.WriteCloser
	closed bool
}

func (l *lineWriter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return io.ErrClosedPipe
	}
	_, err = l.w.Write(append(b, '\n'))
	return err
}

func (l *lineWriter) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.w.Close()
	}
}

// matchAny reports whether tag matches one of the globs.
func matchAny(globs []string, tag string) bool {
	for _, g := range globs {
		if g == "*" || g == tag || targets.MatchGlob(g, tag) {
			return true
		}
	}
	return false
}

// jsonSafe converts what CBOR may decode (map[any]any, []byte) into what
// encoding/json can write.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[k] = jsonSafe(v)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[fmt.Sprint(k)] = jsonSafe(v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = jsonSafe(v)
		}
		return out
	case []byte:
		return string(x)
	}
	return v
}
