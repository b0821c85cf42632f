package cluster

import (
	"fmt"

	"github.com/floodgate/floodgate/fsm"
)

// ignoredSettings lists the creation settings given to this node
// (asked: Config as given, before defaults; zero means not given) that
// its cluster does not use: slots, groups per node, shards and replicas
// are fixed when a cluster is created, and a node that joins or resumes
// one takes the cluster's. Said at start, so an operator who changes them
// on a running cluster learns that nothing changed.
func ignoredSettings(asked Config, v *fsm.MetaView) []string {
	if v == nil || !v.Initialized() {
		return nil
	}
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	kind := fmt.Sprintf("a cluster of %d slots", v.SlotCount)
	if !v.Slotted() {
		kind = fmt.Sprintf("a cluster of %d fixed shards", v.Shards)
	}
	if asked.Shards > 0 && (v.Slotted() || asked.Shards != v.Shards) {
		say("--shards %d is ignored: this node belongs to %s, fixed when the cluster was created", asked.Shards, kind)
	}
	if asked.Slots > 0 && asked.Slots != v.SlotCount {
		say("--slots %d is ignored: this node belongs to %s, fixed when the cluster was created", asked.Slots, kind)
	}
	if asked.GroupsPerNode > 0 && v.Slotted() && asked.GroupsPerNode != v.GroupsPerNode {
		say("--groups-per-node %d is ignored: the cluster's is %d, fixed when it was created", asked.GroupsPerNode, v.GroupsPerNode)
	}
	if asked.GroupsPerNode > 0 && !v.Slotted() {
		say("--groups-per-node %d is ignored: this node belongs to %s", asked.GroupsPerNode, kind)
	}
	if asked.Replicas > 0 && asked.Replicas != v.Replicas {
		say("--replicas %d is ignored: the cluster's is %d, fixed when it was created", asked.Replicas, v.Replicas)
	}
	return out
}
