package event

import "testing"

func TestTags(t *testing.T) {
	const jid = "20261122115704123456"
	tests := []struct{ got, want string }{
		{TagJobNew(jid), "salt/job/20261122115704123456/new"},
		{TagJobRet(jid, "cam1"), "salt/job/20261122115704123456/ret/cam1"},
		{TagMinionStart("cam1"), "salt/minion/cam1/start"},
		{TagRunNew(jid), "salt/run/20261122115704123456/new"},
		{TagRunRet(jid), "salt/run/20261122115704123456/ret"},
		{TagWheelNew(jid), "salt/wheel/20261122115704123456/new"},
		{TagWheelRet(jid), "salt/wheel/20261122115704123456/ret"},
		{TagBeacon("cam1", "diskusage"), "salt/beacon/cam1/diskusage/"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestReservedForMaster(t *testing.T) {
	tests := []struct {
		tag  string
		want bool
	}{
		{"salt/job/20261122115704123456/new", true},
		{"salt/job/20261122115704123456/ret/cam1", true},
		{"salt/job", true},
		{"salt/auth", true},
		{"salt/auth/x", true},
		{"salt/key", true},
		{"salt/run/1/new", true},
		{"salt/wheel/1/ret", true},
		{"salt/presence/change", true},
		{"salt/presence/present", true},
		{"salt/jobs", false},
		{"salt/authx", false},
		{"salt/keys/foo", false},
		{"salt/minion/cam1/start", false},
		{"minion_start", false},
		{"salt/beacon/cam1/diskusage/", false},
		{"myapp/custom", false},
		{"halite/relay/r1/device/aa/found", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := ReservedForMaster(tt.tag); got != tt.want {
			t.Errorf("ReservedForMaster(%q) got %v, want %v", tt.tag, got, tt.want)
		}
	}
}
