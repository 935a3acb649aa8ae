package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/master/api"
)

// TestSplitCompound pins how salt reads a compound command's words:
// SaltCMDOptionParser._mixin_after_parsed in salt/utils/parsers.py (Salt
// 3006), with --args-separator (default ","): the functions split on ",";
// "new style" when the separator stands alone len(funs)-1 times, else "old
// style", where it splits inside words and empty pieces are dropped; then
// each group goes through salt.utils.args.parse_input (key=value words are
// kwargs, the rest YAML-typed).
func TestSplitCompound(t *testing.T) {
	tests := []struct {
		name       string
		words      []string // FUN ARG...
		sep        string
		wantFuns   []string
		wantGroups [][]string
		wantArgs   [][]any
		wantKwargs []map[string]any
		wantErr    string // and exit status 42 unless "empty"
	}{
		{name: "not compound", words: []string{"test.echo", "a,b"}},
		{
			name: "trailing separator ends the first group", words: []string{"cmd.run,test.ping", "echo hi,"},
			wantFuns: []string{"cmd.run", "test.ping"}, wantGroups: [][]string{{"echo hi"}, {}},
			wantArgs: [][]any{{"echo hi"}, {}},
		},
		{
			name: "standalone separator", words: []string{"test.echo,test.echo", "a", ",", "b"},
			wantFuns: []string{"test.echo", "test.echo"}, wantGroups: [][]string{{"a"}, {"b"}},
			wantArgs: [][]any{{"a"}, {"b"}},
		},
		{
			name: "standalone separator keeps commas inside words", words: []string{"cmd.run,test.echo", "echo a,b", ",", "c"},
			wantFuns: []string{"cmd.run", "test.echo"}, wantGroups: [][]string{{"echo a,b"}, {"c"}},
			wantArgs: [][]any{{"echo a,b"}, {"c"}},
		},
		{
			name: "--args-separator=:", words: []string{"cmd.run,test.echo", "echo a,b", ":", "c"}, sep: ":",
			wantFuns: []string{"cmd.run", "test.echo"}, wantGroups: [][]string{{"echo a,b"}, {"c"}},
			wantArgs: [][]any{{"echo a,b"}, {"c"}},
		},
		{
			name: "--args-separator=: inside a word", words: []string{"cmd.run,test.echo,test.ping", "echo a,b:c:"}, sep: ":",
			wantFuns: []string{"cmd.run", "test.echo", "test.ping"}, wantGroups: [][]string{{"echo a,b"}, {"c"}, {}},
			wantArgs: [][]any{{"echo a,b"}, {"c"}, {}},
		},
		{
			name: "empty groups, new style", words: []string{"test.ping,test.ping,test.ping", ",", ","},
			wantFuns: []string{"test.ping", "test.ping", "test.ping"}, wantGroups: [][]string{{}, {}, {}},
			wantArgs: [][]any{{}, {}, {}},
		},
		{
			name: "leading separator in a word", words: []string{"test.ping,test.echo", ",x"},
			wantFuns: []string{"test.ping", "test.echo"}, wantGroups: [][]string{{}, {"x"}},
			wantArgs: [][]any{{}, {"x"}},
		},
		{
			name: "kwargs and YAML per group", words: []string{"cmd.run,test.arg", "echo hi", "cwd=/tmp", ",", "1", "x=true"},
			wantFuns: []string{"cmd.run", "test.arg"}, wantGroups: [][]string{{"echo hi", "cwd=/tmp"}, {"1", "x=true"}},
			wantArgs:   [][]any{{"echo hi"}, {1}},
			wantKwargs: []map[string]any{{"cwd": "/tmp"}, {"x": true}},
		},
		{
			name: "empty function after a trailing comma", words: []string{"test.ping,", ","},
			wantFuns: []string{"test.ping", ""}, wantGroups: [][]string{{}, {}}, wantArgs: [][]any{{}, {}},
		},
		{name: "no arguments for two functions", words: []string{"test.ping,test.ping"}, wantErr: "without defining all arguments"},
		{name: "too few groups", words: []string{"a.b,c.d,e.f", "x,y"}, wantErr: "without defining all arguments"},
		{name: "too many groups", words: []string{"a.b,c.d", "x,y,z"}, wantErr: "more arguments than commands"},
		{name: "doubled separator makes an extra group", words: []string{"a.b,c.d", "x,,y"}, wantErr: "more arguments than commands"},
		{name: "empty separator", words: []string{"a.b,c.d", "x"}, sep: "", wantErr: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sep := tt.sep
			if sep == "" && tt.wantErr != "empty" {
				sep = ","
			}
			funs, groups, err := splitCompound(tt.words[0], tt.words[1:], sep)
			if tt.wantErr != "" {
				var ue *cli.UsageError
				if !errors.As(err, &ue) || !strings.Contains(ue.Msg, tt.wantErr) {
					t.Fatalf("got %v, %q, error %v; want a usage error saying %q", funs, groups, err, tt.wantErr)
				}
				if tt.wantErr != "empty" && ue.Code != cli.ExitNoTarget {
					t.Errorf("got exit status %d, want %d", ue.Code, cli.ExitNoTarget)
				}
				return
			}
			if err != nil {
				t.Fatalf("splitCompound: %v", err)
			}
			if diff := cmp.Diff(tt.wantFuns, funs); diff != "" {
				t.Errorf("functions differ (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantGroups, groups); diff != "" {
				t.Errorf("groups differ (-want +got):\n%s", diff)
			}
			if funs == nil {
				return
			}
			req := &api.Request{Op: api.OpPublish}
			setCompound(req, funs, groups)
			if want := strings.Join(tt.wantFuns, ","); req.Fun != want {
				t.Errorf("got fun %q, want %q", req.Fun, want)
			}
			if diff := cmp.Diff(tt.wantArgs, req.FunArgs); diff != "" {
				t.Errorf("arguments differ (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantKwargs, req.FunKwargs); diff != "" {
				t.Errorf("keyword arguments differ (-want +got):\n%s", diff)
			}
		})
	}
}
