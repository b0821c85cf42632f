package cluster

import (
	"strings"
	"testing"
)

// A resuming node that finds no meta leader names the voters it waits for
// and does not tell its operator to empty the data dir: with every node
// moved to a new IP, that advice on each of them would lose the cluster.
func TestResumeHint(t *testing.T) {
	h := resumeHint([]string{"floodgate-0 at 10.0.0.1:7702", "floodgate-1 at 10.0.0.2:7702"})
	for _, want := range []string{"floodgate-1 at 10.0.0.2:7702", "--advertise-host", "Keep the data dirs"} {
		if !strings.Contains(h, want) {
			t.Errorf("hint lacks %q: %s", want, h)
		}
	}
	if strings.Contains(h, "start it with an empty --data-dir") || strings.Contains(resumeHint(nil), "empty --data-dir and") {
		t.Errorf("a resuming node is told to empty its data dir: %s", h)
	}
}
