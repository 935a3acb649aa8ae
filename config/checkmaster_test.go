package config

import "testing"

func TestCheckMasterAddrTable(t *testing.T) {
	for _, ok := range []string{"m1", "m2:4700", "10.0.0.1", "::1", "[fe80::1]", "[2001:db8::1]:4800", "host.example.com"} {
		if err := checkMasterAddr(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "m:abc", "m:0", "m:70000", "[fe80::1", ":4506", "a b", "m1:"} {
		if err := checkMasterAddr(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
