package cluster

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

// Route says where a shard's leader is.
type Route struct {
	// Local is true when this node leads the shard.
	Local bool
	// NodeID and Addr (gRPC) name the leader otherwise.
	NodeID string
	Addr   string
	// Hint is set on a route taken from a peer's not-leader answer, which
	// may name a leader this node's own view does not know yet.
	Hint bool
}

// Shards is how many slots (legacy: shards) keys hash to; 0 before the
// node is a member.
func (n *Node) Shards() int { return n.View().Shards }

// ShardOf returns the group that owns key in this node's slot table: the
// owner of the key's slot, or in a legacy cluster the key's shard. Before
// the node knows the cluster's slot count (a restart, until its meta state
// is loaded) it answers ErrNotReady: hashing with an unknown count would
// send every key to slot 0 and count it there.
func (n *Node) ShardOf(key string) (int, error) {
	v := n.View()
	if v.Shards <= 0 {
		return 0, fmt.Errorf("%w: the shard count is not known yet", ErrNotReady)
	}
	return int(v.GroupOf(hashing.ShardOf(key, v.Shards))), nil
}

// Ready reports whether the node serves checks: it is a member of its
// cluster (so its meta state, shard count included, is loaded). Until then
// it refuses them (ErrNotReady, nothing counted) rather than guess.
func (n *Node) Ready() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.member
}

// CheckOwner reports why key must not be counted in group shard, as far as
// the meta state tells: the node does not know the slot count yet
// (ErrNotReady, retryable), the group does not exist (ErrWrongShard: the
// sender is wrong), or in a legacy cluster the key hashes to another shard
// (ErrWrongShard). In a cluster of slots the group's own state machine has
// the last word on ownership (ErrMoved, at the leader and at apply): a
// slot table here may be behind the sender's.
func (n *Node) CheckOwner(shard int, key string) error {
	if err := n.CheckGroup(shard); err != nil {
		return err
	}
	if v := n.View(); !v.Slotted() {
		if own := hashing.ShardOf(key, v.Shards); own != shard {
			return fmt.Errorf("%w: the key belongs to shard %d, not %d", ErrWrongShard, own, shard)
		}
	}
	return nil
}

// CheckGroup reports why group (a shard in a legacy cluster) is not one
// of the cluster's, by this node's meta state.
func (n *Node) CheckGroup(shard int) error {
	v := n.View()
	shards := v.Shards
	switch {
	case shards <= 0:
		return fmt.Errorf("%w: the shard count is not known yet", ErrNotReady)
	case v.Slotted():
		if shard < 0 || v.Group(uint32(shard)) == nil {
			if shard >= 0 && uint64(shard) < uint64(v.NextGroup) {
				return fmt.Errorf("%w: group %d was removed", ErrMoved, shard)
			}
			return fmt.Errorf("%w: group %d does not exist", ErrWrongShard, shard)
		}
		return nil
	case shard < 0 || shard >= shards:
		return fmt.Errorf("%w: shard %d does not exist (the cluster has %d)", ErrWrongShard, shard, shards)
	}
	return nil
}

// ownerCatchUp bounds how long CheckOwnerFresh waits for the meta leader.
const ownerCatchUp = time.Second

// CheckOwnerFresh is CheckOwner for a check another node sent: a group
// this node does not know may be one its meta state has not caught up
// with yet (the sender learned of a new group first; this node just
// restarted). So before calling the sender wrong it catches up with the
// meta leader and asks again; when it cannot catch up, the answer is
// ErrNotReady (retryable, nothing counted), not a bad request. *caughtUp
// says this was done already for the same call (a forward of many checks
// catches up once) and is set once it is.
func (n *Node) CheckOwnerFresh(ctx context.Context, shard int, key string, caughtUp *bool) error {
	err := n.CheckOwner(shard, key)
	if !errors.Is(err, ErrWrongShard) || !n.View().Slotted() || *caughtUp {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, ownerCatchUp)
	defer cancel()
	if cerr := n.CatchUpMeta(cctx); cerr != nil {
		return fmt.Errorf("%w: group %d is not known here yet and the meta leader cannot say: %v", ErrNotReady, shard, cerr)
	}
	*caughtUp = true
	return n.CheckOwner(shard, key)
}

// Route finds the leader of shard: this node's own replica knows it best;
// otherwise the last report in the meta state. ErrNoLeader when neither
// knows one (an election, or no quorum): callers answer Unavailable at once
// rather than wait. A voter that has not heard its leader's heartbeats
// for two instants of the heartbeat grid (grid.silent) knows no leader
// either: the leader is paused, cut off or dead without a reset, and a
// check sent to it would hang until its caller's deadline with its
// outcome unknown, where one held back goes to the leader the election
// makes (onLeader tries the route again every few milliseconds). A
// non-voter (a replica being added, or removed) may hear nothing for
// other reasons, and routes as before.
func (n *Node) Route(shard int) (Route, error) {
	if r := n.replica(shard); r != nil {
		if r.group.isLeader() {
			return Route{Local: true, NodeID: n.cfg.NodeID}, nil
		}
		if r.group.silentLeader(n.grid.silent()) && n.replicaVoting(r) {
			return Route{}, fmt.Errorf("%s: %w: its leader has been silent", shardName(shard), ErrNoLeader)
		}
		if id := r.group.leader(); id != "" {
			if addr := n.addrOf(id); addr != "" {
				return Route{NodeID: id, Addr: addr}, nil
			}
		}
		if n.replicaVoting(r) {
			return Route{}, fmt.Errorf("%s: %w", shardName(shard), ErrNoLeader)
		}
	}
	v := n.View()
	if shard < 0 || shard >= len(v.Reports) {
		return Route{}, fmt.Errorf("%s: %w", shardName(shard), ErrNotReady)
	}
	if rep := v.Reports[shard]; rep != nil && rep.Leader != "" && rep.Leader != n.cfg.NodeID {
		if addr := n.addrOf(rep.Leader); addr != "" {
			return Route{NodeID: rep.Leader, Addr: addr}, nil
		}
	}
	return Route{}, fmt.Errorf("%s: %w", shardName(shard), ErrNoLeader)
}

// replicaVoting reports whether the local replica is a voter of its group,
// so its not knowing a leader means the group has none.
func (n *Node) replicaVoting(r *replica) bool {
	cfg, err := r.group.configuration()
	if err != nil {
		return false
	}
	for _, s := range cfg.Servers {
		if string(s.ID) == n.cfg.NodeID {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}

// Submit evaluates checks, all of shard, on this node, which must lead the
// shard: a NotLeaderError (with a hint) otherwise. Checks of strict
// policies are committed through Raft before the results return; checks of
// fast policies are answered at once by the leader's fast lane. shard must
// own every key: callers route with ShardOf, and a peer's forwarded checks
// are each refused when it does not (CheckOwner), so no key is hashed
// twice on the Allow path.
func (n *Node) Submit(ctx context.Context, shard int, checks []fsm.Check) ([]policy.Result, error) {
	r := n.replica(shard)
	if r == nil {
		rt, _ := n.Route(shard)
		return nil, &NotLeaderError{Group: shardName(shard), LeaderID: rt.NodeID, LeaderAddr: rt.Addr}
	}
	if err := fsm.ValidateSets(checks); err != nil {
		return nil, fmt.Errorf("%s: %w", shardName(shard), err)
	}
	if err := fsm.ValidatePolicies(checks); err != nil {
		return nil, fmt.Errorf("%s: %w", shardName(shard), err)
	}
	// The group's state machine knows which slots it owns now: a check for
	// another's is refused before anything is written (the state machine
	// refuses it again at apply, which is the authority); so is one that
	// would add key states beyond --max-key-states. An atomic set goes
	// whole or not at all. A shadow policy never denies: its set, finding
	// no room, is answered as one that would have been denied, and counts
	// nothing.
	var owned []int         // the checks taken, once one is not
	var errs []error        // each refused check's error, by index
	var out []policy.Result // each check's answer, by index
	var (
		seen  fsm.Call  // the call's sets so far, for Vet
		call  *fsm.Call // &seen when there is more than one check
		taken fsm.Room  // what Vet reserved for the sets it took
	)
	if len(checks) > 1 {
		call = &seen
	}
	var late lateDecisions
	defer func() { late.release(r.fsm, taken) }() // once written, or failed unwritten
	most := fsm.Room{States: n.cfg.MaxKeyStates, Bytes: n.cfg.MaxStateBytes}
	for i, j := range sets(checks) {
		v, adds := r.fsm.Vet(checks[i:j], most, call)
		if v != fsm.Take && v != fsm.NotOwned && r.group.raft.State() != raft.Leader {
			v = fsm.Take // a follower's judgment: the batcher answers not-leader
		}
		if v == fsm.Take {
			taken.States += adds.States
			taken.Bytes += adds.Bytes
			if owned != nil {
				for k := i; k < j; k++ {
					owned = append(owned, k)
				}
			}
			continue
		}
		if owned == nil {
			owned, errs, out = make([]int, 0, len(checks)), make([]error, len(checks)), make([]policy.Result, len(checks))
			for k := range i {
				owned = append(owned, k)
			}
		}
		if v != fsm.NotOwned {
			n.keysRefused.Add(int64(j - i))
		}
		var err error
		switch p := checks[i].Policy; {
		case v == fsm.NotOwned:
			err = fmt.Errorf("%s: %w", shardName(shard), ErrMoved)
		case p.Mode == policy.Shadow:
			for k := i; k < j; k++ {
				out[k] = policy.Result{Allowed: true, WouldDeny: true, Limit: p.Limits[0].Limit.Limit}
			}
			continue
		case v == fsm.FullSlot:
			err = fmt.Errorf("%s: %w: key: its slot's states would hold more than %d bytes, the most a slot moves with (every key of a colocated policy is in one slot); checks that add or grow its states are refused until old ones expire",
				shardName(shard), ErrFull, fsm.MaxSlotBytes)
		case v == fsm.FullBytes:
			err = fmt.Errorf("%s: %w: the group's key states would hold more than --max-state-mib allows (%d bytes); checks that add or grow states are refused until old ones expire",
				shardName(shard), ErrFull, n.cfg.MaxStateBytes)
		default:
			err = fmt.Errorf("%s: %w: the group holds --max-key-states (%d) key states; checks of new keys are refused until old ones expire",
				shardName(shard), ErrFull, n.cfg.MaxKeyStates)
		}
		for k := i; k < j; k++ {
			errs[k] = err
		}
	}
	if owned == nil {
		return n.submit(ctx, shard, r, checks, &late)
	}
	if len(owned) > 0 {
		sub := make([]fsm.Check, len(owned))
		for j, i := range owned {
			sub[j] = checks[i]
		}
		res, err := n.submit(ctx, shard, r, sub, &late)
		var pe *PartialError
		if errors.As(err, &pe) {
			res, err = pe.Results, nil
		}
		if err != nil {
			// Nothing written (not the leader, no leader): the whole call
			// may go again, and the refused checks will be vetted again.
			if Retryable(err) {
				return nil, err
			}
			// An unknown outcome for the taken checks alike.
			for _, i := range owned {
				errs[i] = err
			}
		} else {
			for j, i := range owned {
				out[i], errs[i] = res[j], nil
				if pe != nil {
					errs[i] = pe.Errs[j]
				}
			}
		}
	}
	if !slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return out, nil // shadow checks answered without room, and the rest
	}
	return nil, NewPartialError(out, errs)
}

// submit is Submit of checks whose keys the group owned when they came;
// late gathers the requests its caller gave up on undecided.
func (n *Node) submit(ctx context.Context, shard int, r *replica, checks []fsm.Check, late *lateDecisions) ([]policy.Result, error) {
	fast := 0
	for _, c := range checks {
		if c.Policy.Consistency == policy.Fast {
			fast++
		}
	}
	if fast == 0 {
		// The common case: all strict, answered in order by the batcher.
		res, err := r.submitStrict(ctx, checks, late)
		if err != nil {
			return nil, err
		}
		for i := range checks {
			n.countAdmitted(checks[i], res[i])
		}
		return res, nil
	}
	var strict []fsm.Check
	var at []int // where each strict check's result goes
	out := make([]policy.Result, len(checks))
	for i, c := range checks {
		if c.Policy.Consistency != policy.Fast {
			strict, at = append(strict, c), append(at, i)
		}
	}
	var errs []error // per check of checks, when some strict ones were refused at apply
	if len(strict) > 0 {
		res, err := r.submitStrict(ctx, strict, late)
		var pe *PartialError
		if errors.As(err, &pe) {
			// Indexed by strict: answer each check of the call at its own
			// place (a caller reads Errs[j] for its j-th check).
			res, err = pe.Results, nil
			errs = make([]error, len(checks))
			for j, i := range at {
				errs[i] = pe.Errs[j]
			}
		}
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			out[i] = res[j]
			if errs == nil || errs[i] == nil {
				n.countAdmitted(strict[j], res[j])
			}
		}
	}
	decided := len(strict) > 0
	for i, j := range sets(checks) {
		c := checks[i]
		if c.Policy.Consistency != policy.Fast {
			continue
		}
		if c.Policy.Mode == policy.Elastic {
			// One judgment for a whole set, as the batcher gives one per
			// entry.
			c.Elastic = n.room(c.Policy)
		}
		var err error
		if j == i+1 {
			out[i], err = r.fast.decide(ctx, c)
		} else {
			var res []policy.Result
			res, err = r.fast.decideSet(ctx, checks[i:j], c.Elastic)
			copy(out[i:j], res)
		}
		if errors.Is(err, errTakeStrict) {
			// Strict checks of its keys are in flight (mixGuard): decided
			// in the log after them, as one of them.
			err = takeStrict(ctx, r, checks[i:j], out[i:j], late)
		}
		if err != nil {
			if !decided {
				return nil, err // nothing counted: the call may go again whole
			}
			// Checks before this set counted: the call must not go again
			// whole, so each check gets its own answer, and this set its
			// own error, retryable when it was written nowhere (a leader
			// handing over refuses it): a forward carries many callers'
			// checks, which would otherwise all fail although uncounted.
			if errs == nil {
				errs = make([]error, len(checks))
			}
			for k := i; k < j; k++ {
				errs[k] = err
			}
			continue
		}
		decided = true
		for k := i; k < j; k++ {
			n.countAdmitted(checks[k], out[k])
		}
	}
	if errs != nil {
		return nil, NewPartialError(out, errs)
	}
	return out, nil
}

// takeStrict writes fast checks (one atomic set, or one check) through the
// log and answers them into out; a partial refusal at apply (a slot that
// moved) fails them all, as a refused set, counted nowhere.
// The batcher judges an elastic policy's room for the entry, as for any
// strict check.
func takeStrict(ctx context.Context, r *replica, set []fsm.Check, out []policy.Result, late *lateDecisions) error {
	res, err := r.submitStrict(ctx, set, late)
	var pe *PartialError
	if errors.As(err, &pe) {
		for _, e := range pe.Errs {
			if e != nil {
				return e
			}
		}
		res, err = pe.Results, nil
	}
	if err != nil {
		return err
	}
	copy(out, res)
	return nil
}

// sets yields the bounds [i, j) of each atomic set of checks in order: a
// check that is in no set is a set of one.
func sets(checks []fsm.Check) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for i := 0; i < len(checks); {
			j := i + 1
			for j < len(checks) && checks[j].Joined {
				j++
			}
			if !yield(i, j) {
				return
			}
			i = j
		}
	}
}

// countAdmitted adds an admitted check of an elastic policy to this node's
// rates.
func (n *Node) countAdmitted(c fsm.Check, res policy.Result) {
	if c.Policy.Mode == policy.Elastic && res.Allowed && !res.WouldDeny {
		n.rates.admitted(c.Policy, c.Cost, time.Now())
	}
}

// room reports whether an elastic policy may stretch its limits now.
func (n *Node) room(p *policy.Policy) bool { return n.rates.room(p, time.Now()) }

// ResetKey forgets every count of key under p, on this node, which must
// lead the key's shard. It returns how many limit states went.
func (n *Node) ResetKey(ctx context.Context, shard int, key string, p *policy.Policy) (int, error) {
	if err := n.CheckOwner(shard, key); err != nil {
		return 0, err
	}
	r := n.replica(shard)
	if r == nil || !r.group.isLeader() {
		rt, _ := n.Route(shard)
		return 0, &NotLeaderError{Group: shardName(shard), LeaderID: rt.NodeID, LeaderAddr: rt.Addr}
	}
	if !r.fsm.Owns(key) {
		return 0, fmt.Errorf("%s: %w", shardName(shard), ErrMoved)
	}
	// Whatever p's consistency: fast decisions of the key may be pending
	// under another version of the policy (its consistency changed), and
	// flushed after the reset they would count again. A lane with nothing
	// pending returns at once.
	r.fast.drain()
	f := r.group.raft.Apply(fsm.EncodeReset(n.stamp.Now().UnixNano(), key, p), n.cfg.CommitTimeout)
	if err := f.Error(); err != nil {
		return 0, r.batcher.classify(err)
	}
	switch resp := f.Response().(type) {
	case int:
		return resp, nil
	case error:
		if errors.Is(resp, fsm.ErrNotOwned) {
			return 0, fmt.Errorf("%s: %w: %w", shardName(shard), ErrMoved, resp)
		}
		return 0, resp
	}
	return 0, nil
}

// Progress describes this node's replica of group (a shard, or -1 for the
// meta group): whether it exists, leads, how far it applied, and the
// configuration it knows.
func (n *Node) Progress(group int) GroupInfo {
	var g *Group
	if group == metaGroup {
		g = n.metaGroup()
	} else if r := n.replica(group); r != nil {
		g = r.group
	}
	if g == nil {
		return GroupInfo{}
	}
	info := GroupInfo{Present: true, Leader: g.isLeader(), Applied: g.raft.AppliedIndex(), Last: g.raft.LastIndex(), Term: g.raft.CurrentTerm()}
	if group == metaGroup {
		info.LastCommand = g.lastCommand()
	}
	if cfg, err := g.configuration(); err == nil {
		for _, s := range cfg.Servers {
			info.Servers = append(info.Servers, string(s.ID))
		}
	}
	return info
}
