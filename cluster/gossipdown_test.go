package cluster

import (
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// A node keeps the down time of members only: every name that ever left
// gossip (members removed for good, names made up by whoever reaches the
// gossip port) was kept for the node's life.
func TestGossipForgetsStrangersDownTimes(t *testing.T) {
	g := &gossip{log: slog.New(slog.DiscardHandler), start: time.Now(), down: map[string]time.Time{}, at: map[string]string{},
		events: make(chan struct{}, 1), recorded: func(id string) (string, bool) {
			return "", id == "member" // a member recorded without an incarnation (an older release's)
		}}
	for _, name := range []string{"left-for-good", "member", "made-up", "last"} {
		g.NotifyLeave(&memberlist.Node{Name: name})
	}
	if got := slices.Sorted(maps.Keys(g.down)); !slices.Equal(got, []string{"last", "member"}) {
		t.Errorf("down times kept of %v, want the member's and the last one's (not yet listed, perhaps)", got)
	}
}
