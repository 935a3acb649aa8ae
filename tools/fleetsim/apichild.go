package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The API client of -relays' rounds runs in a process of its own
// (-api-child), as a user's halite CLI does: in the simulator's process it
// decoded 10,000 returns a round into that process's heap (two fifths of
// what the simulated devices' process allocated), and every collection of
// the devices' heap, which stands for 10,000 separate devices, came the
// sooner for it. FLEETSIM_API_INPROC=1 keeps it in the simulator.

// apiChild is a running -api-child: a line on its standard input asks for
// one round; it answers with a line of JSON (pingResult).
type apiChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// pingResult is one round as -api-child reports it.
type pingResult struct {
	NS         int64  `json:"ns"`
	Incomplete string `json:"incomplete,omitempty"` // "got of n returned"
	Got        int    `json:"got,omitempty"`
	Err        string `json:"err,omitempty"`
	Tail       []late `json:"tail,omitempty"` // -phases
}

// late is one of a round's last returns, for -phases: the device's id and
// when the API client had it.
type late struct {
	ID string        `json:"id"`
	At time.Duration `json:"at"`
}

func startAPIChild(sock string) (*apiChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-api-child", "-root", sock}
	if *phases {
		args = append(args, "-phases")
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &apiChild{cmd: cmd, in: in, out: sc}, nil
}

// ping asks the child for a round of test.ping to tgt, which n minions
// must answer. ctx ending kills the child (the round's answer would come
// too late to matter).
func (c *apiChild) ping(ctx context.Context, tgt string, n int) (time.Duration, []late, error) {
	stop := context.AfterFunc(ctx, func() { c.cmd.Process.Kill() })
	defer stop()
	if _, err := fmt.Fprintf(c.in, "%s %d\n", tgt, n); err != nil {
		return 0, nil, fmt.Errorf("api client: %w", err)
	}
	if !c.out.Scan() {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return 0, nil, fmt.Errorf("api client exited: %v", c.out.Err())
	}
	var r pingResult
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
		return 0, nil, fmt.Errorf("api client: %w", err)
	}
	switch {
	case r.Incomplete != "":
		return 0, r.Tail, &incomplete{got: r.Got, n: n}
	case r.Err != "":
		return 0, r.Tail, errors.New(r.Err)
	}
	return time.Duration(r.NS), r.Tail, nil
}

func (c *apiChild) pid() int { return c.cmd.Process.Pid }

func (c *apiChild) stop() {
	c.in.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// runAPIChild is -api-child: a round of test.ping on the master's local
// API socket sock for each line of standard input ("tgt n"), answered on
// standard output, until standard input closes.
func runAPIChild(sock string) error {
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		f := strings.Fields(in.Text())
		var n int
		if len(f) != 2 {
			return fmt.Errorf("api child: want \"tgt n\", got %q", in.Text())
		}
		if _, err := fmt.Sscanf(f[1], "%d", &n); err != nil {
			return fmt.Errorf("api child: %q: %w", f[1], err)
		}
		d, tail, err := pingTail(context.Background(), sock, f[0], n)
		r := pingResult{NS: int64(d), Tail: tail}
		var inc *incomplete
		switch {
		case errors.As(err, &inc):
			r.Incomplete, r.Got = err.Error(), inc.got
		case err != nil:
			r.Err = err.Error()
		}
		if err := enc.Encode(&r); err != nil {
			return err
		}
	}
	return in.Err()
}
