package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompoundCommands runs Salt's compound commands through real
// processes: halite splits the functions and their arguments as salt does
// (SaltCMDOptionParser._mixin_after_parsed in salt/utils/parsers.py, with
// --args-separator), the master signs the lists into one job, and each
// agent runs the functions in order and returns a dict keyed by function,
// or a list with multifunc_ordered (Minion._thread_multi_return in
// salt/minion.py); the exit status follows the largest retcode
// (SaltCMD._get_retcode in salt/cli/salt.py).
func TestCompoundCommands(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("cam1", "")
	c.startAgent("cam2", "multifunc_ordered: true\n")
	c.acceptAll("cam1", "cam2")

	tests := []struct {
		name     string
		args     []string
		want     map[string]string // minion: its return as JSON
		wantCode int
	}{
		{
			name: "cmd.run and test.ping", args: []string{"*", "cmd.run,test.ping", "echo hi,"},
			want: map[string]string{"cam1": `{"cmd.run":"hi","test.ping":true}`, "cam2": `["hi",true]`},
		},
		{
			name: "standalone separator, same function twice", args: []string{"cam1", "test.echo,test.echo", "a", ",", "b"},
			want: map[string]string{"cam1": `{"test.echo":"b"}`},
		},
		{
			name: "--args-separator=:", args: []string{"cam1", "--args-separator=:", "cmd.run,test.echo", "echo a,b", ":", "c"},
			want: map[string]string{"cam1": `{"cmd.run":"a,b","test.echo":"c"}`},
		},
		{
			name: "kwargs per function", args: []string{"cam1", "test.arg,cmd.run", "x", "k=1", ",", "pwd", "cwd=/tmp"},
			want: map[string]string{"cam1": `{"cmd.run":"/tmp","test.arg":{"args":["x"],"kwargs":{"k":1}}}`},
		},
		{
			name: "a retcode fails the command", args: []string{"cam1", "test.ping,test.retcode", ",", "3"},
			want: map[string]string{"cam1": `{"test.ping":true,"test.retcode":true}`}, wantCode: 1,
		},
		{
			name: "unknown function fails its entry only", args: []string{"*", "no.such,test.ping", ","},
			want: map[string]string{
				"cam1": `{"no.such":"'no.such' is not available.","test.ping":true}`,
				"cam2": `["'no.such' is not available.",true]`,
			},
			wantCode: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rets, r := c.jsonOut("halite", tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if len(rets) != len(tt.want) {
				t.Errorf("got returns of %d minions, want %d: %v", len(rets), len(tt.want), rets)
			}
			for id, want := range tt.want {
				if got, _ := json.Marshal(rets[id]); string(got) != want {
					t.Errorf("%s: got %s, want %s", id, got, want)
				}
			}
		})
	}

	// The dict keeps the functions' order, as Salt's does; nested output
	// is salt's.
	r := c.cli("halite", "cam1", "test.ping,cmd.run", ",", "echo hi", "--out", "json")
	if i, j := strings.Index(r.stdout, `"test.ping"`), strings.Index(r.stdout, `"cmd.run"`); i < 0 || j < i {
		t.Errorf("json output: got %q, want test.ping before cmd.run, the order they ran in", r.stdout)
	}
	r = c.cli("halite", "cam1", "cmd.run,test.ping", "echo hi,")
	if want := "cam1:\n    ----------\n    cmd.run:\n        hi\n    test.ping:\n        True\n"; r.stdout != want || r.code != 0 {
		t.Errorf("nested output: exit %d, got %q, want %q", r.code, r.stdout, want)
	}

	// Groups that do not match the functions: salt's usage error, status
	// 42, and nothing is published.
	for _, args := range [][]string{{"cam1", "test.ping,test.ping"}, {"cam1", "test.ping,test.ping", "a,b,c"}} {
		r := c.cli("halite", args...)
		if r.code != 42 || !strings.Contains(r.stdout+r.stderr, "Cannot execute compound command") {
			t.Errorf("halite %q: exit %d, output %q; want 42 and salt's message", args, r.code, r.stdout+r.stderr)
		}
	}
}
