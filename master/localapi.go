package master

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/orch"
	"github.com/halite-fleet/halite/protocol"
)

// serveAPI accepts CLI connections on the local socket until ctx ends.
func (m *Master) serveAPI(ctx context.Context, ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		m.connWG.Add(1)
		go func() {
			defer m.connWG.Done()
			defer c.Close()
			growStack(0)
			m.serveRequest(ctx, c)
		}()
	}
}

// apiStack is the stack a request's goroutine gets at once (growStack):
// decoding even a small request (event.send's tag and data) takes the
// CBOR decoder's recursion past 16 KiB of stack, and a new goroutine's
// stack grew there by doubling, each time copying the stack and
// adjusting every frame of the decoder's recursion. That was 7 % of the
// master's CPU under a stream of event.send calls, and a request's
// decoding 4x slower than on a grown stack
// (BenchmarkRequestDecodeNewGoroutine).
const apiStack = 16 << 10

// growStack makes the calling goroutine's stack hold a frame of apiStack
// bytes, so that the runtime grows it once, while it holds a frame or
// two, to the size the request's decoding needs. i is 0; it keeps the
// compiler from dropping the array.
//
//go:noinline
func growStack(i int) byte {
	var b [apiStack]byte
	b[i] = 1
	return b[(i+1)%apiStack]
}

// apiConn is one CLI request's connection. Responses are buffered; send
// flushes, queue leaves the flush to a later send or flush, so a burst of
// returns goes out in a few writes.
type apiConn struct {
	c  net.Conn
	bw *bufio.Writer
	f  *protocol.Framer
}

// apiWriters holds the 64 KiB response buffers of finished requests: most
// requests (event.send, a runner call) answer a few hundred bytes, and a
// fresh buffer each was a twentieth of the master's CPU under a stream of
// them.
var apiWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

func newAPIConn(c net.Conn) *apiConn {
	bw := apiWriters.Get().(*bufio.Writer)
	bw.Reset(c)
	a := &apiConn{c: c, bw: bw}
	a.f = protocol.NewFramer(struct {
		io.Reader
		io.Writer
	}{c, a.bw}, api.MaxFrame)
	return a
}

func (a *apiConn) queue(r *api.Response) error {
	b, err := protocol.Marshal(r)
	if err != nil {
		return err
	}
	a.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return a.f.WriteFrame(b)
}

func (a *apiConn) flush() error { return a.bw.Flush() }

// release gives the connection's buffer back; a is not used after.
func (a *apiConn) release() {
	a.bw.Reset(nil)
	apiWriters.Put(a.bw)
	a.bw = nil
}

func (a *apiConn) send(r *api.Response) error {
	if err := a.queue(r); err != nil {
		return err
	}
	return a.flush()
}

func (a *apiConn) fail(err error) {
	code := api.CodeOther
	var re *api.RemoteError
	if errors.As(err, &re) {
		code = re.Code
	}
	a.send(&api.Response{Kind: api.KindError, Error: err.Error(), Code: code, Done: true})
}

func badRequest(format string, args ...any) error {
	return &api.RemoteError{Code: api.CodeBadRequest, Msg: sprintf(format, args...)}
}

func (m *Master) serveRequest(ctx context.Context, c net.Conn) {
	a := newAPIConn(c)
	defer a.release()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := a.f.ReadFrame()
	if err != nil {
		m.log.Debug("api read", zap.Error(err))
		return
	}
	c.SetReadDeadline(time.Time{})
	req := new(api.Request)
	if err := protocol.Unmarshal(b, req); err != nil {
		a.fail(badRequest("malformed request: %v", err))
		return
	}
	if ce := m.log.Check(zap.DebugLevel, "api request"); ce != nil {
		ce.Write(zap.String("op", req.Op), zap.String("fun", req.Fun), zap.String("tgt", req.Tgt))
	}
	// A CLI that goes away cancels its request.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var one [1]byte
		c.Read(one[:])
		cancel()
	}()
	switch req.Op {
	case api.OpPublish:
		m.servePublish(rctx, a, req)
	case api.OpRunner:
		if req.Fun == "state.event" {
			m.serveEvents(rctx, a, req)
			return
		}
		m.serveCall(rctx, a, req, "run", m.runRunner)
	case api.OpWheel:
		m.serveCall(rctx, a, req, "wheel", m.runWheel)
	case api.OpEvents:
		m.serveEvents(rctx, a, req)
	case api.OpComplete:
		m.serveComplete(a, req)
	default:
		a.fail(badRequest("unknown operation %q", req.Op))
	}
}

func (m *Master) servePublish(ctx context.Context, a *apiConn, req *api.Request) {
	if req.Preview {
		minions, err := m.expected(req.Tgt, req.TgtType, req.Delimiter)
		if err != nil {
			a.fail(err)
			return
		}
		a.send(&api.Response{Kind: api.KindJob, Minions: minions, Done: true})
		return
	}
	if err := checkCompound(req); err != nil {
		a.fail(err)
		return
	}
	if req.Fun == "" {
		a.fail(badRequest("no function given"))
		return
	}
	jid := m.jids.Next()
	var sub *event.Subscription
	if !req.Async {
		sub = m.bus.Subscribe("salt/job/"+jid+"/ret/*", 1<<16)
		defer sub.Close()
	}
	p, err := m.publish(jid, req)
	if err != nil {
		a.fail(err)
		return
	}
	if err := a.send(&api.Response{Kind: api.KindJob, JID: p.jid, Minions: p.minions, NotConnected: p.notConnected, Done: req.Async}); err != nil || req.Async {
		return
	}
	waiting := make(map[string]bool, len(p.minions))
	for _, id := range p.minions {
		waiting[id] = true
	}
	timeout := time.Duration(req.Timeout * float64(time.Second))
	if timeout <= 0 {
		timeout = time.Duration(m.cfg.Timeout) * time.Second
	}
	gather := time.Duration(req.GatherJobTimeout * float64(time.Second))
	if gather <= 0 {
		gather = time.Duration(m.cfg.GatherJobTimeout) * time.Second
	}
	err = m.awaitReturns(ctx, sub, jid, req.User, timeout, gather, waiting, func(data map[string]any) error {
		if err := a.queue(&api.Response{Kind: api.KindReturn, JID: jid, Data: data}); err != nil {
			return err
		}
		if len(sub.C()) == 0 {
			return a.flush()
		}
		return nil
	})
	if err != nil {
		return
	}
	if len(waiting) == 0 {
		a.send(&api.Response{Kind: api.KindDone, JID: jid, Done: true})
		return
	}
	missing := make([]string, 0, len(waiting))
	for _, id := range p.minions {
		if waiting[id] {
			missing = append(missing, id)
		}
	}
	a.send(&api.Response{Kind: api.KindDone, JID: jid, Missing: missing, NotConnected: p.notConnected, Done: true})
}

// callFunc runs one runner or wheel function.
type callFunc func(ctx context.Context, req *api.Request) (any, error)

// callEvent is the data of Salt's salt/<kind>/<jid>/new for a runner (kind
// "run") or wheel call (SyncClientMixin.low in salt/client/mixins.py): fun
// is "runner.<fun>" or "wheel.<fun>", fun_args the arguments followed by
// the keyword arguments as one mapping if there are any; a wheel call's
// also has its tag, salt/wheel/<jid> (ClearFuncs.wheel in salt/master.py).
func callEvent(kind, fun, jid, user string, arg []any, kwarg map[string]any) map[string]any {
	client := "runner"
	if kind != "run" {
		client = kind
	}
	args := append(make([]any, 0, len(arg)+1), arg...)
	if len(kwarg) > 0 {
		kw := make(map[string]any, len(kwarg))
		for k, v := range kwarg {
			kw[k] = v
		}
		args = append(args, kw)
	}
	d := map[string]any{"fun": client + "." + fun, "fun_args": args, "jid": jid, "user": user}
	if kind == "wheel" {
		d["tag"] = "salt/wheel/" + jid
	}
	return d
}

// callRetEvent is the data of salt/<kind>/<jid>/ret: that of callEvent
// with the call's return (or error text) and success.
func callRetEvent(kind, fun, jid, user string, arg []any, kwarg map[string]any, res any, err error) map[string]any {
	d := callEvent(kind, fun, jid, user, arg, kwarg)
	d["success"] = err == nil
	if err != nil {
		d["return"] = err.Error()
	} else {
		d["return"] = res
		// RunnerClient.low (salt/client/mixins.py): a return with "data"
		// (orchestrate's) succeeded when check_result says so.
		if r, ok := res.(map[string]any); ok {
			if data, ok := r["data"]; ok {
				d["success"] = orch.CheckResult(data)
			}
		}
	}
	return d
}

// serveCall runs a runner or wheel function, firing salt/<kind>/<jid>/new
// and /ret around it as Salt does.
func (m *Master) serveCall(ctx context.Context, a *apiConn, req *api.Request, kind string, fn callFunc) {
	jid := m.jids.Next()
	user := req.User
	if user == "" {
		user = "root"
	}
	m.bus.Publish("salt/"+kind+"/"+jid+"/new", callEvent(kind, req.Fun, jid, user, req.Arg, req.Kwarg))
	// Progress may come from the call's own goroutines: one writer at a
	// time, and none once the result is being sent.
	var mu sync.Mutex
	ended := false
	pctx := withProgress(ctx, func(data map[string]any) {
		ev := maps.Clone(data)
		ev["_stamp"] = event.Stamp(time.Now())
		m.bus.Publish("salt/"+kind+"/"+jid+"/progress", ev)
		if !req.Progress {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			a.send(&api.Response{Kind: api.KindEvent, Tag: "salt/" + kind + "/" + jid + "/progress", JID: jid, Data: data})
		}
	})
	res, err := safeCall(pctx, req, fn)
	mu.Lock()
	ended = true
	mu.Unlock()
	if err != nil && !isRemote(err) {
		m.log.Error(kind+" function failed", zap.String("fun", req.Fun), zap.Error(err))
	}
	m.bus.Publish("salt/"+kind+"/"+jid+"/ret", callRetEvent(kind, req.Fun, jid, user, req.Arg, req.Kwarg, res, err))
	if err != nil {
		a.fail(err)
		return
	}
	a.send(&api.Response{Kind: api.KindResult, JID: jid, Result: res, Done: true})
}

// serveEvents streams live events: state.event [tagmatch=GLOB] [count=N].
func (m *Master) serveEvents(ctx context.Context, a *apiConn, req *api.Request) {
	match := req.TagMatch
	count := req.Count
	if v, ok := req.Kwarg["tagmatch"]; ok {
		match = sprintf("%v", v)
	}
	if v, ok := req.Kwarg["count"]; ok {
		n, ok := toInt(v)
		if !ok {
			a.fail(badRequest("count must be a whole number, got %v", v))
			return
		}
		count = n
	}
	if match == "" {
		match = "*"
	}
	sub := m.bus.Subscribe(match, 4096)
	defer sub.Close()
	// An empty response tells the CLI the subscription is live.
	if err := a.send(&api.Response{Kind: api.KindResult}); err != nil {
		return
	}
	for n := 0; count <= 0 || n < count; n++ {
		select {
		case ev := <-sub.C():
			// A burst of events goes out in a few writes: the buffer is
			// flushed when no more are waiting (or full).
			if err := a.queue(&api.Response{Kind: api.KindEvent, Tag: ev.Tag, Data: ev.Data}); err != nil {
				return
			}
			if len(sub.C()) == 0 || (count > 0 && n+1 >= count) {
				if err := a.flush(); err != nil {
					return
				}
			}
		case <-ctx.Done():
			return
		}
	}
	a.send(&api.Response{Kind: api.KindDone, Done: true})
}

// safeCall runs fn, turning a panic into an error so that one bad runner
// call cannot take the master down.
func safeCall(ctx context.Context, req *api.Request, fn callFunc) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("%s crashed: %v", req.Fun, p)
		}
	}()
	return fn(ctx, req)
}

func isRemote(err error) bool {
	var re *api.RemoteError
	return errors.As(err, &re)
}
