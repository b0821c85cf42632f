package cluster

import (
	"slices"

	"github.com/hashicorp/raft"
)

// stepKind is one membership change (or leadership move) of a shard's
// group toward its placement.
type stepKind int

const (
	// The zero stepKind is no step (planShard's shardStep{}).
	_ stepKind = iota
	// stepReaddress updates a server whose Raft address moved.
	stepReaddress
	// stepAddNonvoter adds a placed node that has no replica yet.
	stepAddNonvoter
	// stepPromote makes a caught-up placed non-voter a voter.
	stepPromote
	// stepRemove retires a replica the placement no longer lists.
	stepRemove
	// stepLeave hands leadership away: the leader itself must go.
	stepLeave
	// stepPrefer hands leadership to the preferred leader.
	stepPrefer
)

// shardStep is what planShard decides: the change and the server it is
// about (for stepReaddress, with its new address and suffrage).
type shardStep struct {
	kind  stepKind
	id    string
	addr  string
	voter bool
}

// shardPlanInput is everything planShard looks at; caughtUp is asked only
// about placed non-voters, since it costs a call to the node.
type shardPlanInput struct {
	me       string
	servers  []raft.Server
	desired  []string // placement, preferred leader first
	raftAddr func(id string) string
	alive    func(id string) bool
	caughtUp func(id string) bool
	settled  bool // led long enough to hand leadership on
}

// planShard decides the next step of a shard's group toward its placement,
// at most one at a time. Order is what keeps it safe: a new replica joins
// as a non-voter, becomes a voter only once caught up, and replicas leave
// only when every placed replica votes (unreachable ones first, and a
// reachable voter only while the voters left have a live majority), so no
// step ever shrinks the group below a quorum of up-to-date replicas. It is pure: the reconciler runs
// what it decides, and its table tests pin each rule.
func planShard(in shardPlanInput) shardStep {
	if len(in.desired) == 0 {
		return shardStep{} // no active node to place the shard on: change nothing
	}
	servers := map[string]raft.Server{}
	for _, s := range in.servers {
		servers[string(s.ID)] = s
	}
	for _, s := range in.servers {
		if id := string(s.ID); id != in.me {
			if a := in.raftAddr(id); a != "" && raft.ServerAddress(a) != s.Address {
				return shardStep{kind: stepReaddress, id: id, addr: a, voter: s.Suffrage == raft.Voter}
			}
		}
	}
	for _, id := range in.desired {
		if _, ok := servers[id]; ok || !in.alive(id) {
			continue
		}
		if a := in.raftAddr(id); a != "" {
			return shardStep{kind: stepAddNonvoter, id: id, addr: a}
		}
	}
	allVote := true
	for _, id := range in.desired {
		s, ok := servers[id]
		switch {
		case !ok:
			allVote = false
		case s.Suffrage != raft.Voter:
			allVote = false
			if in.caughtUp(id) {
				return shardStep{kind: stepPromote, id: id, addr: string(s.Address)}
			}
		}
	}
	if !allVote {
		return shardStep{}
	}
	live := func(id string) bool { return id == in.me || in.alive(id) }
	if out := removalOrder(in.servers, in.desired, live); len(out) > 0 {
		s, id := out[0], string(out[0].ID) // one step at a time, the first in order
		if s.Suffrage == raft.Voter && live(id) && !liveQuorumWithout(in.servers, id, live) {
			return shardStep{} // wait: the unreachable voters go first, or come back
		}
		if id == in.me {
			return shardStep{kind: stepLeave, id: id}
		}
		return shardStep{kind: stepRemove, id: id}
	}
	if in.desired[0] != in.me && in.settled {
		return shardStep{kind: stepPrefer, id: in.desired[0]}
	}
	return shardStep{}
}

// removalOrder returns the servers not in keep, those live does not
// vouch for first. Taking an unreachable voter out never makes a quorum
// harder to reach; taking a reachable one out beside unreachable ones can
// leave no live majority: of three voters, one dead and one leaving, the
// leaving one's removal left two of two with one dead, a change that
// never committed, and the group had no leader until the dead node
// returned.
func removalOrder(servers []raft.Server, keep []string, live func(id string) bool) []raft.Server {
	var out []raft.Server
	for _, s := range servers {
		if !slices.Contains(keep, string(s.ID)) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b raft.Server) int {
		return boolOrder(live(string(a.ID)), live(string(b.ID)))
	})
	return out
}

// boolOrder orders false before true.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// liveQuorumWithout reports whether the voters of servers other than id
// hold a majority that live vouches for: a change that takes voter id out
// (a removal, a demotion) then commits, and the group goes on without it.
func liveQuorumWithout(servers []raft.Server, id string, live func(id string) bool) bool {
	voters, up := 0, 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter || string(s.ID) == id {
			continue
		}
		voters++
		if live(string(s.ID)) {
			up++
		}
	}
	return up > voters/2
}
