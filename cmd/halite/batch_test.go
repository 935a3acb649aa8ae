package main

import "testing"

// TestParseBatch: -b takes package batch's sizes (its tests pin
// salt/cli/batch.py get_bnum) and gives a usage error otherwise.
func TestParseBatch(t *testing.T) {
	for _, ok := range []string{"3", "10%", "%50"} {
		if err := parseBatch(ok); err != nil {
			t.Errorf("parseBatch(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "x", "0", "1.5"} {
		if err := parseBatch(bad); err == nil {
			t.Errorf("parseBatch(%q): got nil, want an error", bad)
		}
	}
}
