package cluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/fsm"
)

// A setting fixed at a cluster's creation is reported as ignored only
// when it was given and differs from the cluster's; settings left out
// (zero) never are.
func TestIgnoredSettings(t *testing.T) {
	slotted := &fsm.MetaView{ClusterID: "c", Replicas: 3, SlotCount: 4096, GroupsPerNode: 1}
	legacy := &fsm.MetaView{ClusterID: "c", Replicas: 3, Shards: 16}
	cases := []struct {
		name  string
		asked Config
		view  *fsm.MetaView
		want  []string // substrings, one per message, in order
	}{
		{"nothing given", Config{}, slotted, nil},
		{"the cluster's own values", Config{Slots: 4096, GroupsPerNode: 1, Replicas: 3}, slotted, nil},
		{"legacy, its own values", Config{Shards: 16, Replicas: 3}, legacy, nil},
		{"not initialized yet", Config{Slots: 7}, &fsm.MetaView{}, nil},
		{"other slots", Config{Slots: 1024}, slotted, []string{"--slots 1024 is ignored: this node belongs to a cluster of 4096 slots"}},
		{"other groups per node", Config{GroupsPerNode: 4}, slotted, []string{"--groups-per-node 4 is ignored: the cluster's is 1"}},
		{"other replicas", Config{Replicas: 5}, legacy, []string{"--replicas 5 is ignored: the cluster's is 3"}},
		{"shards on a cluster of slots", Config{Shards: 8}, slotted, []string{"--shards 8 is ignored: this node belongs to a cluster of 4096 slots"}},
		{"other shards", Config{Shards: 8}, legacy, []string{"--shards 8 is ignored: this node belongs to a cluster of 16 fixed shards"}},
		{"slots on a legacy cluster", Config{Slots: 4096}, legacy, []string{"--slots 4096 is ignored: this node belongs to a cluster of 16 fixed shards"}},
		{"groups per node on a legacy cluster", Config{GroupsPerNode: 2}, legacy, []string{"--groups-per-node 2 is ignored: this node belongs to a cluster of 16 fixed shards"}},
		{"all of them", Config{Shards: 2, Slots: 9, GroupsPerNode: 2, Replicas: 1}, slotted, []string{"--shards 2", "--slots 9", "--groups-per-node 2", "--replicas 1"}},
	}
	for _, c := range cases {
		got := ignoredSettings(c.asked, c.view)
		if len(got) != len(c.want) || !slices.EqualFunc(got, c.want, strings.Contains) {
			t.Errorf("%s: got %q, want messages containing %q", c.name, got, c.want)
		}
	}
}
