package cluster

import (
	"slices"

	"github.com/hashicorp/raft"
)

// stepKind is one membership change (or leadership move) of a shard's
// group toward its placement.
type stepKind int

const (
	stepNone stepKind = iota
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
// only when every placed replica votes, so no step ever shrinks the group
// below a quorum of up-to-date replicas. It is pure: the reconciler runs
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
	for _, s := range in.servers {
		switch id := string(s.ID); {
		case slices.Contains(in.desired, id):
		case id == in.me:
			return shardStep{kind: stepLeave, id: id}
		default:
			return shardStep{kind: stepRemove, id: id}
		}
	}
	if in.desired[0] != in.me && in.settled {
		return shardStep{kind: stepPrefer, id: in.desired[0]}
	}
	return shardStep{}
}
