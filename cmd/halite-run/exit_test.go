package main

import (
	"errors"
	"testing"

	"github.com/halite-fleet/halite/internal/cli"
)

// TestRunnerExit: salt-run exits with the "retcode" of a runner's
// dictionary return, or of its "data" (SaltRun.run in salt/cli/run.py,
// Salt 3006), else 0.
func TestRunnerExit(t *testing.T) {
	tests := []struct {
		name string
		res  any
		want int
	}{
		{"true", true, 0},
		{"string", "done", 0},
		{"dict without retcode", map[string]any{"a": 1}, 0},
		{"retcode 0", map[string]any{"retcode": int64(0)}, 0},
		{"retcode 2", map[string]any{"retcode": int64(2)}, 2},
		{"retcode in data", map[string]any{"data": map[string]any{"retcode": uint64(5)}}, 5},
		{"top level wins", map[string]any{"retcode": int64(3), "data": map[string]any{"retcode": int64(5)}}, 3},
		{"out of range", map[string]any{"retcode": int64(300)}, 1},
		{"negative", map[string]any{"retcode": int64(-1)}, 1},
		{"not a number", map[string]any{"retcode": "bad"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := 0
			if err := runnerExit(tt.res); err != nil {
				var ee *cli.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("got error %v, want an ExitError", err)
				}
				got = ee.Code
			}
			if got != tt.want {
				t.Errorf("got exit %d, want %d", got, tt.want)
			}
		})
	}
}
