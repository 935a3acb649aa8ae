package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	Op   string         `cbor:"op"` // "event.send" (to the master), "event.fire" (local bus only) or "call"
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

const localMaxFrame = 4 << 20

func listenUnix(path string) (net.Listener, error) { return unixsock.Listen(path) }

func (a *Agent) serveLocal(ctx context.Context, ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept local: %w", err)
		}
		a.handleLocal(c)
	}
}

// handleLocal answers one request; requests are tiny, so they are served
// one at a time.
func (a *Agent) handleLocal(c net.Conn) {
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
		case "call":
			res := a.exec.Run(context.Background(), exec.Request{JID: fmt.Sprintf("%020d", time.Now().UnixMicro()),
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
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("connect to the agent at %s (is halite-agent running?): %w", socket, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
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
