package reactor

import (
	"testing"

	"github.com/halite-fleet/halite/render/sls"
)

// TestCompileTypes: the reaction types Compile takes. "cmd" is Salt's
// alias of "local" (Reactor.aliases = {"cmd": "local"} and
// resolve_aliases in salt/utils/reactor.py, Salt 3006).
func TestCompileTypes(t *testing.T) {
	tests := []struct {
		key      string
		wantType string // "" for an error
		wantFun  string
	}{
		{"local.cmd.run", TypeLocal, "cmd.run"},
		{"cmd.cmd.run", TypeLocal, "cmd.run"},
		{"cmd.test.ping", TypeLocal, "test.ping"},
		{"runner.jobs.list_jobs", TypeRunner, "jobs.list_jobs"},
		{"wheel.key.accept", TypeWheel, "key.accept"},
		{"caller.test.ping", TypeCaller, "test.ping"},
		{"command.test.ping", "", ""},
		{"cmdx.test.ping", "", ""},
		{"Cmd.test.ping", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			entries := []sls.Entry{{ID: "r", Line: 1, Value: map[string]any{
				tt.key: []any{map[string]any{"tgt": "web*"}, map[string]any{"arg": []any{"echo hi"}}},
			}}}
			rs, err := Compile("f.sls", "t", entries)
			if tt.wantType == "" {
				if err == nil {
					t.Fatalf("got reactions %+v, want an error", rs)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want a %s reaction", err, tt.wantType)
			}
			if len(rs) != 1 || rs[0].Type != tt.wantType || rs[0].Fun != tt.wantFun {
				t.Fatalf("got %+v, want one reaction of type %s, fun %s", rs, tt.wantType, tt.wantFun)
			}
			if tt.wantType == TypeLocal && rs[0].Tgt != "web*" {
				t.Errorf("got tgt %q, want web*", rs[0].Tgt)
			}
		})
	}
}
