package cluster

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

const (
	// catchUpSlack is how many entries a new replica may trail the leader
	// by and still be promoted to voter: under load it never trails by 0.
	catchUpSlack = 1024
	// leaderSettle is how long a node leads a shard before it hands the
	// shard to its preferred leader, and transferCooldown how long it
	// waits between attempts, so leadership never flaps.
	leaderSettle     = time.Second
	transferCooldown = 10 * time.Second
	// tickEvery is how often an idle shard leader writes a tick entry so
	// expired keys are dropped even when no request comes.
	tickEvery = 10 * time.Second
	// opTimeout bounds one reconcile step (a membership change, an RPC).
	opTimeout = 5 * time.Second
	// rejoinEvery paces attempts to reach members gossip does not see.
	rejoinEvery = 2 * time.Second
)

// reconcileState is the reconcilers' bookkeeping.
type reconcileState struct {
	pause sync.Mutex // held while the node resets to join another cluster

	// kick starts a pass at once: a group's leader changed (the meta
	// state learns of it only from the pass).
	kick chan struct{}

	mu           sync.Mutex
	busy         map[int]bool
	again        map[int]bool // a pass found its key busy: pass again when it ends
	lastTransfer map[int]time.Time
	leaderSince  map[int]time.Time
	lastRejoin   time.Time // only the reconcile loop touches it
	// logCap and logCapOf are the member's cap below this node's that
	// noteLogCap last told of (0: none); only the reconcile loop touches them.
	logCap   int64
	logCapOf string
	// listed is when the reconcile loop first saw each member listed
	// (reconcileMeta judges by it); only that loop touches it.
	listed    listedAt
	rejoining atomic.Bool // a rejoinGossip contact is under way
	// placed is the placement of the view placedOf was computed from: a
	// view never changes once published, so the loop, which runs every
	// ReconcileInterval, recomputes it only when the meta state changed.
	placedOf *fsm.MetaView
	placed   *placement
}

// reconcileLoop moves the cluster toward the placement: on every meta
// change, gossip event and change of a local group's leader, and on a
// timer of ReconcileInterval that backs off to restPause while the
// cluster is at rest.
func (n *Node) reconcileLoop() {
	defer n.wg.Done()
	pause := n.cfg.ReconcileInterval
	t := time.NewTimer(pause)
	defer t.Stop()
	n.recon.busy = map[int]bool{}
	n.recon.lastTransfer = map[int]time.Time{}
	n.recon.leaderSince = map[int]time.Time{}
	changed := n.metaState().Changed()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-changed:
		case <-n.gossip.events:
		case <-n.recon.kick:
		}
		// Taken before the pass reads the view: a change made while the
		// pass runs (its own steps run beside it, and the meta leader's
		// plan of the next slot moves lands within milliseconds) then
		// starts the next pass at once. Taken after, it waited for the
		// timer: half the slot moves of a join started 250 ms late.
		changed = n.metaState().Changed()
		pause = nextPause(pause, n.cfg.ReconcileInterval, n.reconcileOnce())
		t.Reset(pause)
	}
}

// reconcileOnce makes one pass and reports whether the cluster, as far as
// this node sees it, is at rest (rest.go).
func (n *Node) reconcileOnce() bool {
	if !n.recon.pause.TryLock() {
		return false
	}
	defer n.recon.pause.Unlock()
	v := n.View()
	n.mu.RLock()
	member := n.member
	n.mu.RUnlock()
	if !v.Initialized() || v.Node(n.cfg.NodeID) == nil {
		// Removed only as the end of this node's own log says: a view
		// part-way through a replay may be of an earlier incarnation.
		if member && v.Initialized() && n.removedFromMeta() {
			n.leftOne.Do(func() {
				n.log.Info("this node was removed from the cluster")
				close(n.left)
			})
		}
		return false
	}
	if !member {
		// Still joining (waitMember): the view may be replayed history.
		return false
	}
	n.noteLogCap(v)
	listed := n.recon.listed.note(v, time.Now())
	// Another data dir's record of this id: judged once the node's own
	// log is replayed (part-way, the record may be of an earlier life of
	// its own, before a leave).
	other := checkIncarnation(v.Node(n.cfg.NodeID), n.self())
	if other != nil && n.metaReplayed() {
		// Judged again on the replayed view: v may be older than the
		// replay's end.
		other = checkIncarnation(n.View().Node(n.cfg.NodeID), n.self())
	}
	if other != nil && n.metaReplayed() {
		n.replacedOne.Do(func() {
			n.replacedErr = other
			n.log.Error("this node's id is another data dir's member", "err", other)
			close(n.replaced)
		})
		return false
	}
	n.rejoinGossip(v)
	if n.recon.placedOf != v {
		n.recon.placedOf, n.recon.placed = v, placementOf(v)
	}
	pl := n.recon.placed
	n.manageReplicas(v, pl)
	// Judged before this pass spawns its steps (which find nothing to do
	// in a cluster at rest), with the steps of earlier passes that still run.
	rest := atRest(v, pl, n.slotsToMove(v)) && n.localAtRest(v, pl)
	local := n.replicas()
	n.recon.forgetGone(local)
	for _, r := range local {
		n.watchMoves(r, v)
		if !r.group.isLeader() {
			n.recon.mu.Lock()
			delete(n.recon.leaderSince, r.id)
			n.recon.mu.Unlock()
			r.fast.dropStale()
			continue
		}
		n.spawn(r.id, func(ctx context.Context) { n.reconcileShard(ctx, r, v, pl) })
	}
	if meta := n.metaGroup(); meta != nil && meta.isLeader() {
		first := maps.Clone(listed)
		n.spawn(metaGroup, func(ctx context.Context) { n.reconcileMeta(ctx, v, first) })
	}
	if self := v.Node(n.cfg.NodeID); other == nil && addrsDiffer(self, n.self()) {
		n.spawn(selfUpdate, func(ctx context.Context) {
			if err := n.applyMeta(ctx, fsm.MetaUpsertNode, &metav1.UpsertNode{Node: n.self()}); MetaRefused(err) {
				// Its --max-log-length, say, cannot hold a stored policy
				// (checkCaps): an operator must act.
				n.log.Error("the cluster refuses this node's member record", "err", err)
			}
		})
	}
	return rest
}

// selfUpdate is the busy key of this node's update of its own record
// (addresses, region, release).
const selfUpdate = -2

func addrsDiffer(a, b *metav1.Node) bool {
	return a.GrpcAddr != b.GrpcAddr || a.HttpAddr != b.HttpAddr || a.RaftAddr != b.RaftAddr ||
		a.GossipAddr != b.GossipAddr || a.Region != b.Region || a.Version != b.Version || a.Incarnation != b.Incarnation ||
		a.MaxLogLength != b.MaxLogLength
}

// leaderChanged starts a reconcile pass at once (a new shard leader
// reports itself to the meta state from the pass) and wakes the waiters of
// LeadersChanged.
func (n *Node) leaderChanged() {
	signal(n.recon.kick)
	n.leaders.fire()
}

// untilStop returns a context of parent that also ends when the node
// stops, so background work does not hold up Close.
func (n *Node) untilStop(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// spawn runs fn for key unless a previous run for key is still going;
// then, once that run ends, a new pass starts at once: the pass that
// found it busy came for a change the running step may not have seen
// (a slot move planned while the step froze the last one), and the timer
// would take it up only a ReconcileInterval later.
func (n *Node) spawn(key int, fn func(ctx context.Context)) {
	n.recon.mu.Lock()
	if n.recon.busy[key] {
		if n.recon.again == nil {
			n.recon.again = map[int]bool{}
		}
		n.recon.again[key] = true
		n.recon.mu.Unlock()
		return
	}
	n.recon.busy[key] = true
	n.recon.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tctx, tcancel := context.WithTimeout(context.Background(), opTimeout)
		defer tcancel()
		ctx, cancel := n.untilStop(tctx)
		defer cancel()
		fn(ctx)
		n.recon.mu.Lock()
		delete(n.recon.busy, key)
		again := n.recon.again[key]
		delete(n.recon.again, key)
		n.recon.mu.Unlock()
		if again {
			signal(n.recon.kick)
		}
	}()
}

// forgetGone drops what the reconciler keeps of groups that have no
// replica here any more (a node outlives every group moved off or removed
// from it), and transfers older than their cooldown, which hold nothing
// back.
func (rc *reconcileState) forgetGone(local []*replica) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id := range rc.leaderSince {
		if !slices.ContainsFunc(local, func(r *replica) bool { return r.id == id }) {
			delete(rc.leaderSince, id)
		}
	}
	for id, at := range rc.lastTransfer {
		if time.Since(at) >= transferCooldown {
			delete(rc.lastTransfer, id)
		}
	}
}

// reconcileShard runs on a shard's leader: it reports the group to the
// meta state and makes the one step toward the placement that planShard
// decides.
func (n *Node) reconcileShard(ctx context.Context, r *replica, v *fsm.MetaView, pl *placement) {
	g := r.group
	me := n.cfg.NodeID
	n.recon.mu.Lock()
	since, ok := n.recon.leaderSince[r.id]
	if !ok {
		since = time.Now()
		n.recon.leaderSince[r.id] = since
	}
	n.recon.mu.Unlock()
	cfg, err := g.configuration()
	if err != nil || r.id >= len(pl.shards) {
		return
	}
	n.reportShard(ctx, r, g.raft.CurrentTerm(), cfg, v)
	n.maybeTick(ctx, r)
	n.reconcileSlots(ctx, r, v)
	desired := pl.shards[r.id]
	step := planShard(shardPlanInput{
		me: me, servers: cfg.Servers, desired: desired,
		raftAddr: func(id string) string {
			if m := v.Node(id); m != nil {
				return m.RaftAddr
			}
			return ""
		},
		alive:    n.gossip.alive,
		caughtUp: func(id string) bool { return n.caughtUp(ctx, g, r.id, id, v) },
		settled:  time.Since(since) > leaderSettle,
	})
	id, addr := raft.ServerID(step.id), raft.ServerAddress(step.addr)
	switch step.kind {
	case stepReaddress:
		n.change(ctx, g, "readdress", step.id, func() raft.IndexFuture {
			if step.voter {
				return g.raft.AddVoter(id, addr, 0, opTimeout)
			}
			return g.raft.AddNonvoter(id, addr, 0, opTimeout)
		})
	case stepAddNonvoter:
		n.change(ctx, g, "add non-voter", step.id, func() raft.IndexFuture {
			return g.raft.AddNonvoter(id, addr, 0, opTimeout)
		})
	case stepPromote:
		n.change(ctx, g, "promote to voter", step.id, func() raft.IndexFuture {
			return g.raft.AddVoter(id, addr, 0, opTimeout)
		})
	case stepRemove:
		n.change(ctx, g, "remove", step.id, func() raft.IndexFuture {
			return g.raft.RemoveServer(id, 0, opTimeout)
		})
	case stepLeave:
		n.transfer(ctx, r.id, g, desired, v, true)
	case stepPrefer:
		n.transfer(ctx, r.id, g, desired, v, false)
	}
}

// change makes one membership change and logs its outcome.
func (n *Node) change(ctx context.Context, g *Group, what, id string, fn func() raft.IndexFuture) {
	if err := awaitFuture(ctx, fn()); err != nil {
		n.log.Warn("raft membership change", "group", g.name, "change", what, "server", id, "err", err)
		return
	}
	n.log.Info("raft membership change", "group", g.name, "change", what, "server", id)
}

// caughtUp reports whether node id's replica of group has applied close
// to everything the leader has.
func (n *Node) caughtUp(ctx context.Context, g *Group, group int, id string, v *fsm.MetaView) bool {
	m := v.Node(id)
	if m == nil || !n.gossip.alive(id) {
		return false
	}
	info, err := n.peers.Progress(ctx, m.GrpcAddr, group)
	if err != nil || !info.Present || info.Applied == 0 {
		return false
	}
	return info.Applied+catchUpSlack >= g.raft.AppliedIndex()
}

// transfer hands the group's leadership to the first caught-up voter of
// desired. force skips the cooldown: the leader itself must go.
func (n *Node) transfer(ctx context.Context, shard int, g *Group, desired []string, v *fsm.MetaView, force bool) {
	n.recon.mu.Lock()
	last := n.recon.lastTransfer[shard]
	n.recon.mu.Unlock()
	if !force && time.Since(last) < transferCooldown {
		return
	}
	cfg, err := g.configuration()
	if err != nil {
		return
	}
	for _, id := range desired {
		if id == n.cfg.NodeID {
			continue
		}
		var target *raft.Server
		for i := range cfg.Servers {
			if string(cfg.Servers[i].ID) == id && cfg.Servers[i].Suffrage == raft.Voter {
				target = &cfg.Servers[i]
			}
		}
		if target == nil || !n.caughtUp(ctx, g, shard, id, v) {
			if force {
				continue
			}
			return // only ever hand a shard to its preferred leader
		}
		n.recon.mu.Lock()
		n.recon.lastTransfer[shard] = time.Now() // a refusal below waits out the cooldown too: one reading and warning per cooldown
		n.recon.mu.Unlock()
		// A leader that must go hands over whatever its clock reads: it may
		// be the one off, and the target's own clock watch guards it.
		if !force && !n.clockInStep(ctx, v.Node(id)) {
			return
		}
		move := func() error { return g.transferLeadership(ctx, target) }
		var err error
		if r := n.replica(shard); r != nil && r.group == g {
			err = r.fast.handOver(move) // every fast decision answered so far goes along
		} else {
			err = move()
		}
		if err != nil {
			n.log.Warn("leadership transfer", "group", g.name, "to", id, "err", err)
		}
		return
	}
}

// reportShard records this leader's view of its group in the meta state
// (leader, term, replicas, whether its state machine is initialized for
// slot moves), when the meta state does not already say exactly that.
func (n *Node) reportShard(ctx context.Context, r *replica, term uint64, cfg raft.Configuration, v *fsm.MetaView) {
	me, shard := n.cfg.NodeID, r.id
	report := &metav1.ShardReport{Shard: uint32(shard), Leader: me, Term: term, Ready: r.fsm.Initialized()}
	for _, s := range cfg.Servers {
		report.Replicas = append(report.Replicas, &metav1.Replica{NodeId: string(s.ID), Voter: s.Suffrage == raft.Voter})
	}
	if shard < len(v.Reports) {
		if rep := v.Reports[shard]; rep != nil && rep.Leader == me && rep.Term == term && rep.Ready == report.Ready && sameReplicas(rep.Replicas, report.Replicas) {
			return
		}
	}
	if err := n.applyMeta(ctx, fsm.MetaShardReport, report); err != nil {
		n.log.Debug("shard report", "shard", shard, "err", err)
	}
}

// maybeTick writes a tick entry to an idle shard that holds keys, so log
// time moves on and expired keys are dropped (and the states of slots
// that moved away are freed): every tickEvery, or more often for a group
// of more records than a tick sweeps a 32nd of (fsm.TickInterval).
func (n *Node) maybeTick(ctx context.Context, r *replica) {
	st := r.fsm.Stats()
	now := n.stamp.Now().UnixNano()
	if st.States+st.Orphans == 0 || now-st.Now < int64(fsm.TickInterval(tickEvery, st.Records)) {
		return
	}
	_ = awaitFuture(ctx, r.group.raft.Apply(fsm.EncodeTick(now), opTimeout))
}

// sameReplicas reports whether two replica lists hold the same servers
// with the same suffrage, in any order.
func sameReplicas(a, b []*metav1.Replica) bool {
	if len(a) != len(b) {
		return false
	}
	voter := make(map[string]bool, len(a))
	for _, r := range a {
		voter[r.NodeId] = r.Voter
	}
	for _, r := range b {
		if v, ok := voter[r.NodeId]; !ok || v != r.Voter {
			return false
		}
	}
	return true
}
