package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

// Operations of a Request.
const (
	OpPublish = "publish" // run a job on minions: the `halite` CLI
	OpRunner  = "runner"  // run a master runner: halite-run
	OpWheel   = "wheel"   // run a wheel function: halite-key
	OpEvents  = "events"  // stream live events: state.event
	// OpComplete answers the CLIs' shell completion: Fun "functions",
	// "runners" or "keys"; it fires no event.
	OpComplete = "complete"
)

// Request is what a CLI asks of the master.
type Request struct {
	Op    string         `cbor:"op"`
	Fun   string         `cbor:"fun,omitempty"`
	Arg   []any          `cbor:"arg,omitempty"`
	Kwarg map[string]any `cbor:"kwarg,omitempty"`
	// Funs makes a publication a compound job (halite 'cmd.run,test.ping'):
	// the functions, run in order in one job; Fun is then empty or the
	// functions joined with ",", Arg and Kwarg are empty, and FunArgs and
	// FunKwargs hold each function's arguments (nil, or one entry per
	// function).
	Funs      []string         `cbor:"funs,omitempty"`
	FunArgs   [][]any          `cbor:"fun_args,omitempty"`
	FunKwargs []map[string]any `cbor:"fun_kwargs,omitempty"`
	Tgt       string           `cbor:"tgt,omitempty"`
	TgtType   string           `cbor:"tgt_type,omitempty"`
	Delimiter string           `cbor:"delimiter,omitempty"`
	Timeout   float64          `cbor:"timeout,omitempty"` // seconds to wait for returns
	// GatherJobTimeout (seconds; 0: the master's gather_job_timeout) is
	// how long each saltutil.find_job round waits once Timeout passed.
	GatherJobTimeout float64 `cbor:"gather_job_timeout,omitempty"`
	Ret              string  `cbor:"ret,omitempty"`
	// ReturnConfig and ReturnKwargs are --return_config and
	// --return_kwargs: the job's returners are opened with the options
	// under "<ReturnConfig>.<returner>." and with ReturnKwargs over all.
	ReturnConfig string         `cbor:"ret_config,omitempty"`
	ReturnKwargs map[string]any `cbor:"ret_kwargs,omitempty"`
	Async        bool           `cbor:"async,omitempty"`
	Preview      bool           `cbor:"preview,omitempty"` // publish: only say which minions match
	User         string         `cbor:"user,omitempty"`
	TagMatch     string         `cbor:"tagmatch,omitempty"`
	Count        int            `cbor:"count,omitempty"`
	// Progress asks a runner or wheel call to stream its progress (Salt's
	// salt/run/<jid>/progress events) as KindEvent responses before its
	// result; CallProgress sets it.
	Progress bool `cbor:"progress,omitempty"`
}

// Response kinds.
const (
	KindJob    = "job"    // a job was published: JID, Minions
	KindReturn = "return" // one minion's return: Data holds Salt's return dict
	KindResult = "result" // a runner or wheel result: Result
	KindEvent  = "event"  // a live event: Tag, Data
	KindDone   = "done"   // the last response: Missing lists minions that did not return
	KindError  = "error"  // the request failed: Error, Code
)

// Error codes of a KindError response. Append only.
const (
	CodeOther      = 0
	CodeBadRequest = 1 // malformed request, unknown function, bad arguments
	CodeNoMinions  = 2 // the target matched no minion
	CodeFailed     = 3 // the function ran and failed
)

// Response is one message of the master's answer.
type Response struct {
	Kind    string         `cbor:"kind"`
	JID     string         `cbor:"jid,omitempty"`
	Minions []string       `cbor:"minions,omitempty"`
	Data    map[string]any `cbor:"data,omitempty"`
	Tag     string         `cbor:"tag,omitempty"`
	Result  any            `cbor:"result,omitempty"`
	Missing []string       `cbor:"missing,omitempty"`
	// NotConnected lists the minions of Missing that were not connected
	// when the job was published.
	NotConnected []string `cbor:"not_connected,omitempty"`
	Error        string   `cbor:"error,omitempty"`
	Code         int      `cbor:"code,omitempty"`
	Done         bool     `cbor:"done,omitempty"`
}

// RemoteError is a KindError response as a Go error.
type RemoteError struct {
	Code int
	Msg  string
}

func (e *RemoteError) Error() string { return e.Msg }

// MaxFrame bounds one request or response on the local socket.
const MaxFrame = 64 << 20

// Client is a connection to the master's local socket carrying one request.
type Client struct {
	conn net.Conn
	f    *protocol.Framer
	stop func() bool
}

// Dial connects to the master's socket and sends req.
func Dial(ctx context.Context, socket string, req *Request) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("connect to master at %s (is halite-master running?): %w", socket, err)
	}
	c := &Client{conn: conn, f: protocol.NewFramer(conn, MaxFrame)}
	b, err := protocol.Marshal(req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.f.WriteFrame(b); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send request: %w", err)
	}
	// Cancelling ctx unblocks a waiting Next.
	c.stop = context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	return c, nil
}

// Next reads the next response. After the response with Done set it returns
// io.EOF-like errors; callers stop at Done.
func (c *Client) Next() (*Response, error) {
	b, err := c.f.ReadFrame()
	if err != nil {
		return nil, fmt.Errorf("read from master: %w", err)
	}
	r := new(Response)
	if err := protocol.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("read from master: %w", err)
	}
	return r, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	c.stop()
	return c.conn.Close()
}

// Call sends req and returns the single result of a runner or wheel call.
func Call(ctx context.Context, socket string, req *Request) (any, error) {
	return CallProgress(ctx, socket, req, nil)
}

// CallProgress is Call for a runner or wheel call that streams its
// progress: each progress event's data goes to progress as it comes (nil:
// none is asked for).
func CallProgress(ctx context.Context, socket string, req *Request, progress func(data map[string]any)) (any, error) {
	if progress != nil {
		r := *req
		r.Progress = true
		req = &r
	}
	c, err := Dial(ctx, socket, req)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var result any
	for {
		r, err := c.Next()
		if err != nil {
			return nil, err
		}
		switch r.Kind {
		case KindError:
			return nil, &RemoteError{Code: r.Code, Msg: r.Error}
		case KindResult:
			result = r.Result
		case KindEvent:
			if progress != nil {
				progress(r.Data)
			}
		}
		if r.Done {
			return result, nil
		}
	}
}

// IsCode reports whether err is a RemoteError with the given code.
func IsCode(err error, code int) bool {
	var re *RemoteError
	return errors.As(err, &re) && re.Code == code
}
