package e2e

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// TestTargeting drives every target type through the real CLI against
// real agents whose static grains differ, with nodegroups from the master
// config.
func TestTargeting(t *testing.T) {
	c := newCluster(t, `nodegroups:
  north: 'G@site:north'
  cams: 'L@cam-a,cam-b'
  northcams: 'N@north and N@cams'
  listform:
    - gw-1
    - cam-b
`)
	c.startMaster()
	c.startAgent("cam-a", "grains:\n  site: north\n  model: x100\n  roles: [camera, zone-3]\n  firmware:\n    version: '1.2.0'\n")
	c.startAgent("cam-b", "grains:\n  site: south\n  model: x200\n  roles: [camera]\n  firmware:\n    version: '1.4.1'\n")
	c.startAgent("gw-1", "grains:\n  site: north\n  model: gw\n  roles: [gateway]\n")
	c.acceptAll("cam-a", "cam-b", "gw-1")

	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"*"}, []string{"cam-a", "cam-b", "gw-1"}},
		{[]string{"cam-?"}, []string{"cam-a", "cam-b"}},
		{[]string{"-E", "cam-(a|b)"}, []string{"cam-a", "cam-b"}},
		{[]string{"-L", "gw-1,cam-b,nosuch"}, []string{"cam-b", "gw-1"}},
		{[]string{"-G", "site:north"}, []string{"cam-a", "gw-1"}},
		{[]string{"-G", "roles:zone-3"}, []string{"cam-a"}},
		{[]string{"-G", "firmware:version:1.[0-2].*"}, []string{"cam-a"}},
		{[]string{"-P", "model:x[12]00"}, []string{"cam-a", "cam-b"}},
		{[]string{"-S", "127.0.0.0/8"}, []string{"cam-a", "cam-b", "gw-1"}},
		{[]string{"-C", "G@site:north and not gw-*"}, []string{"cam-a"}},
		{[]string{"-C", "( G@model:x1* or G@roles:gateway ) and E@.*-[a1]"}, []string{"cam-a", "gw-1"}},
		{[]string{"-C", "not G@site:north"}, []string{"cam-b"}},
		{[]string{"-C", "G|@firmware|version|1.4.*"}, []string{"cam-b"}},
		{[]string{"-N", "north"}, []string{"cam-a", "gw-1"}},
		{[]string{"-N", "northcams"}, []string{"cam-a"}},
		{[]string{"-N", "listform"}, []string{"cam-b", "gw-1"}},
		{[]string{"-C", "N@cams and G@model:x2*"}, []string{"cam-b"}},
		{[]string{"--delimiter", "/", "-G", "firmware/version/1.4.1"}, []string{"cam-b"}},
	}
	for _, tt := range tests {
		// --preview-target says what would run...
		r := c.cli("halite", append([]string{"--preview-target", "--out", "json"}, tt.args...)...)
		var preview []string
		if err := json.Unmarshal([]byte(r.stdout), &preview); err != nil || r.code != 0 {
			t.Errorf("--preview-target %q: exit %d, %q %q", tt.args, r.code, r.stdout, r.stderr)
			continue
		}
		if strings.Join(preview, ",") != strings.Join(tt.want, ",") {
			t.Errorf("--preview-target %q = %v, want %v", tt.args, preview, tt.want)
		}
		// ...and the job reaches exactly those agents, each of which
		// checks the target itself.
		rets, r := c.jsonOut("halite", append(tt.args, "test.ping")...)
		var got []string
		for id := range rets {
			got = append(got, id)
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(tt.want, ",") || r.code != 0 {
			t.Errorf("halite %q test.ping: exit %d, returns from %v, want %v", tt.args, r.code, got, tt.want)
		}
	}

	// A target that matches nothing fails as salt does.
	r := c.cli("halite", "-G", "site:mars", "test.ping")
	if r.code != 2 || !strings.Contains(r.stdout, "No minions matched the target") {
		t.Errorf("no match: exit %d, stdout %q; want 2 and No minions matched the target", r.code, r.stdout)
	}
	// Malformed expressions are usage errors naming the position.
	for _, args := range [][]string{
		{"-C", "G@site:north and"},
		{"-C", "( cam-a"},
		{"-E", "cam-("},
		{"-S", "10.0.0.1/33"},
		{"-N", "nosuchgroup"},
	} {
		r := c.cli("halite", append(args, "test.ping")...)
		if r.code != 2 || !strings.Contains(r.stderr, "position") && !strings.Contains(r.stderr, "nodegroup") {
			t.Errorf("halite %q: exit %d, stderr %q; want 2 and the position", args, r.code, r.stderr)
		}
	}
}
