package master

import "testing"

// TestRunnerDocs: every runner has its documentation for doc.runner and
// halite-run -d (Salt's runners all carry a docstring), and no
// documentation is left for a runner that is gone.
func TestRunnerDocs(t *testing.T) {
	names := (&Master{}).RunnerNames()
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
		if runnerDocs[n] == "" {
			t.Errorf("runner %s: no documentation in runnerDocs", n)
		}
	}
	for n := range runnerDocs {
		if !have[n] {
			t.Errorf("runnerDocs documents %s, which is not a runner", n)
		}
	}
}
