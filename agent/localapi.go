package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/internal/unixsock"
	"github.com/halite-fleet/halite/protocol"
)

// The agent's local socket (sock_dir/agent.sock, mode 0600) lets
// halite-call on the device reach the running agent: one request, one
// response, each a frame of CBOR.

// LocalRequest is a request to the running agent.
type LocalRequest struct {
	// Op is "event.send" (to the master), "event.fire" (local bus only),
	// "call", "state.get" (the master's compile of Fun for this device:
	// Return is the verified job's jid, fun, arg and kwarg) or "return"
	// (Data: halite-call's return of a state.get job, to the master) or
	// "blob.fetch" (Data: {"sha256": hex} of a file whose manifest was in
	// a state.get job: fetched by chunks into the state cache; Return is
	// its path).
	Op   string         `cbor:"op"`
	Tag  string         `cbor:"tag,omitempty"`
	Data map[string]any `cbor:"data,omitempty"`
	// Op "call": a function that needs the running agent (beacons.*),
	// run by its executor.
	Fun    string         `cbor:"fun,omitempty"`
	Args   []any          `cbor:"args,omitempty"`
	Kwargs map[string]any `cbor:"kwargs,omitempty"`
}

// LocalResponse is the agent's answer.
type LocalResponse struct {
	OK        bool   `cbor:"ok"`
	Error     string `cbor:"error,omitempty"`
	Connected bool   `cbor:"connected"`
	Return    any    `cbor:"return,omitempty"`  // Op "call"
	Retcode   int    `cbor:"retcode,omitempty"` // Op "call"
}

// localMaxFrame bounds a frame on the socket: a compiled state job and
// some room.
const localMaxFrame = protocol.DefaultMaxFrame + 64<<10

// callFetchTimeout bounds a "blob.fetch" for halite-call.
const callFetchTimeout = 30 * time.Minute

// maxLocalConns bounds the requests served at once.
const maxLocalConns = 8

func listenUnix(path string) (net.Listener, error) { return unixsock.Listen(path) }

func (a *Agent) serveLocal(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxLocalConns)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept local: %w", err)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			c.Close()
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			a.handleLocal(ctx, c)
		}()
	}
}

// handleLocal answers one request. A few are served at once: a state.get
// waits for the master's compile.
func (a *Agent) handleLocal(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	f := protocol.NewFramer(c, localMaxFrame)
	b, err := f.ReadFrame()
	if err != nil {
		return
	}
	var req LocalRequest
	resp := LocalResponse{Connected: a.nconn.Load() > 0}
	if err := protocol.Unmarshal(b, &req); err != nil {
		resp.Error = "malformed request: " + err.Error()
	} else {
		switch req.Op {
		case "event.send":
			if err := a.SendEvent(req.Tag, req.Data); err != nil {
				resp.Error = err.Error()
				a.log.Warn("refused local event", zap.String("tag", req.Tag), zap.Error(err))
			} else {
				resp.OK = true
			}
		case "event.fire":
			if err := a.FireLocal(req.Tag, req.Data); err != nil {
				resp.Error = err.Error()
			} else {
				resp.OK = true
			}
		case "state.get":
			c.SetDeadline(time.Now().Add(stateGetTimeout + 5*time.Second))
			ret, err := a.stateGet(ctx, req.Fun, req.Args, req.Kwargs)
			if err != nil {
				resp.Error = err.Error()
			} else {
				resp.OK, resp.Return = true, ret
			}
		case "blob.fetch":
			// A salt:// file of a job handed to halite-call, too large
			// for the job: fetched by chunks into the state cache.
			c.SetDeadline(time.Now().Add(callFetchTimeout + 5*time.Second))
			sum, _ := req.Data["sha256"].(string)
			fctx, cancel := context.WithTimeout(ctx, callFetchTimeout)
			p, err := a.callFetch(fctx, sum)
			cancel()
			if err != nil {
				resp.Error = err.Error()
			} else {
				resp.OK, resp.Return = true, p
			}
		case "return":
			if err := a.stateReturn(req.Data); err != nil {
				resp.Error = err.Error()
			} else {
				resp.OK = true
			}
		case "call":
			res := a.exec.Run(ctx, exec.Request{JID: fmt.Sprintf("%020d", time.Now().UnixMicro()),
				Fun: req.Fun, Args: req.Args, Kwargs: req.Kwargs, User: "halite-call"})
			resp.OK, resp.Return, resp.Retcode = res.Success, res.Return, res.Retcode
		default:
			resp.Error = fmt.Sprintf("unknown operation %q", req.Op)
		}
	}
	if out, err := protocol.Marshal(&resp); err == nil {
		f.WriteFrame(out)
	}
}

// LocalCall sends req to the agent listening on socket.
func LocalCall(ctx context.Context, socket string, req *LocalRequest) (*LocalResponse, error) {
	return LocalCallWithin(ctx, socket, req, 10*time.Second)
}

// LocalCallWithin is LocalCall that waits up to within for the answer.
func LocalCallWithin(ctx context.Context, socket string, req *LocalRequest, within time.Duration) (*LocalResponse, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("connect to the agent at %s (is halite-agent running?): %w", socket, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(within))
	f := protocol.NewFramer(c, localMaxFrame)
	b, err := protocol.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := f.WriteFrame(b); err != nil {
		return nil, fmt.Errorf("send to agent: %w", err)
	}
	rb, err := f.ReadFrame()
	if err != nil {
		return nil, fmt.Errorf("read from agent: %w", err)
	}
	resp := new(LocalResponse)
	if err := protocol.Unmarshal(rb, resp); err != nil {
		return nil, fmt.Errorf("read from agent: %w", err)
	}
	return resp, nil
}
