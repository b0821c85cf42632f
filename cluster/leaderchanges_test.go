package cluster

import (
	"testing"
	"testing/synctest"

	dto "github.com/prometheus/client_model/go"

	"github.com/floodgate/floodgate/metrics"
)

// Each leader change counts once in floodgate_leader_changes_total summed
// over the replicas, on the new leader: every replica observes every
// change, and counting each observation made a routine rolling restart
// look like churn to the alert.
func TestLeaderChangeCountsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		counter := metrics.LeaderChanges.WithLabelValues("shard")
		before := counted(t, counter)
		const moves = 3
		for range moves {
			moveLeader(t, g)
		}
		if got := counted(t, counter) - before; got != moves {
			t.Fatalf("%d leader changes counted %v times over the group's replicas, want %d", moves, got, moves)
		}
	})
}

// counted is a counter's value.
func counted(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
