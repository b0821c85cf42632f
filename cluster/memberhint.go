package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/raft"
)

// notMemberHint is what a node that joins says while no member has added
// it: it may have left its cluster before, and cannot resume it.
const notMemberHint = "a node that left its cluster (floodgatectl leave) cannot resume it from its data dir: start it with an empty --data-dir and --join; a joining node waits for a member to add it"

// removedHint is what a node resuming from a data dir whose meta group no
// longer holds it says: it left (floodgatectl leave) or was taken out, and
// waits for nothing. Before, it said voters were down or moved, and to
// keep the data dir, while they ran where it said.
const removedHint = "this node was removed from its cluster (floodgatectl leave): its data dir's meta group no longer holds it, and no member will contact it; " +
	"start it with --join and a member's address to join again as a new member (this data dir may stay), or with an empty --data-dir"

// InOwnMetaConfiguration reports whether this node's own copy of the meta
// group's configuration still holds it: false once the entry that took it
// out (floodgatectl leave) reached it, and then it waits for nothing when
// it resumes (removedHint).
func (n *Node) InOwnMetaConfiguration() bool {
	cfg, err := n.metaGroup().configuration()
	return err != nil || len(cfg.Servers) == 0 ||
		slices.ContainsFunc(cfg.Servers, func(s raft.Server) bool { return string(s.ID) == n.cfg.NodeID })
}

// memberHint says why a node is not a member yet. A node resuming from its
// data dir waits for its meta group to elect a leader, and telling its
// operator to empty the data dir there would throw the cluster's counts
// and policies away (on a majority, for good): the usual cause is voters
// down or unreachable at the Raft addresses they were last known at, as
// when every node came back at a new IP.
func (n *Node) memberHint(resuming bool) string {
	if !resuming {
		return notMemberHint
	}
	if !n.InOwnMetaConfiguration() {
		// Its own log took it out of the meta group: no leader will ever
		// contact it, however many voters run.
		return removedHint
	}
	var voters []string
	if cfg, err := n.metaGroup().configuration(); err == nil {
		for _, s := range cfg.Servers {
			addr := string(s.Address)
			if a, err := (addrBook{n}).ServerAddr(s.ID); err == nil {
				addr = string(a)
			}
			voters = append(voters, fmt.Sprintf("%s at %s", s.ID, addr))
		}
	}
	return resumeHint(voters)
}

// resumeHint is memberHint for a resuming node whose meta voters are
// voters ("id at raft-addr").
func resumeHint(voters []string) string {
	list := "unknown"
	if len(voters) > 0 {
		list = strings.Join(voters, ", ")
	}
	return "this node resumes its cluster from its data dir and waits for the meta group to elect a leader, which needs most of its voters (" +
		list + ") running and reachable at those Raft addresses: start them; if they came back at other addresses, the ones listed are stale " +
		"(advertise names that follow the nodes, such as a pod's DNS name, with --advertise-host). Keep the data dirs: emptying them loses the cluster's counts and policies"
}
