package cluster

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// A member gossip never saw is down only from when this node first saw it
// listed, if that is later than gossip's own start: a node that joins
// gossip after the cluster lists it (an older release does) is not dead
// for the hour the meta leader ran before it joined. A member gossip saw
// go down is down from then, whatever the listing.
func TestUnreachableSince(t *testing.T) {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	joined := start.Add(time.Hour)
	for _, tc := range []struct {
		name          string
		health        string
		since, listed time.Time
		want          time.Time
	}{
		{"never seen, listed after the start", HealthUnknown, start, joined, joined},
		{"never seen, listed before the start", HealthUnknown, joined, start, joined},
		{"never seen, no listing known", HealthUnknown, start, time.Time{}, start},
		{"seen going down", HealthDead, joined, joined.Add(time.Minute), joined},
	} {
		if got := unreachableSince(tc.health, tc.since, tc.listed); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// listedAt keeps the first time each member was seen listed, and forgets
// a member once it is no longer listed (a rejoin starts again).
func TestListedAt(t *testing.T) {
	view := func(ids ...string) *fsm.MetaView {
		v := &fsm.MetaView{}
		for _, id := range ids {
			v.Nodes = append(v.Nodes, &metav1.Node{Id: id})
		}
		return v
	}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var l listedAt
	l.note(view("n1", "n2"), t0)
	got := l.note(view("n1", "n2", "n3"), t0.Add(time.Minute))
	if !got["n1"].Equal(t0) || !got["n3"].Equal(t0.Add(time.Minute)) {
		t.Fatalf("listed %v", got)
	}
	l.note(view("n1", "n3"), t0.Add(2*time.Minute))
	got = l.note(view("n1", "n2", "n3"), t0.Add(3*time.Minute))
	if !got["n2"].Equal(t0.Add(3*time.Minute)) || len(got) != 3 {
		t.Fatalf("after n2 left and came back: %v", got)
	}
}
