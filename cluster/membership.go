package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// bootstrap creates a new cluster with this node as its only member: the
// meta group and every shard group start with this node as sole voter.
// Each step is idempotent, so a crash half-way is finished on restart.
func (n *Node) bootstrap(ctx context.Context) error {
	// The cluster this creates is this dir's own life, from its first
	// entry: said before there is any, so a crash part-way is resumed.
	// Its id is chosen and recorded first, before the Raft port takes any
	// peer (accept): members of another cluster still calling an address
	// this node reuses are refused from their first handshake (AdmitPeer),
	// not let into its meta group before InitCluster names the cluster.
	id := n.ownCluster()
	if id == "" {
		id = newClusterID()
		if err := recordCluster(n.cfg.DataDir, id); err != nil {
			return fmt.Errorf("data-dir: %w", err)
		}
	}
	if err := n.accept(); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	me := raft.Server{ID: raft.ServerID(n.cfg.NodeID), Address: raft.ServerAddress(n.cfg.RaftAddr)}
	meta := n.metaGroup()
	if err := meta.bootstrap([]raft.Server{me}); err != nil {
		return fmt.Errorf("bootstrap meta group: %w", err)
	}
	if err := meta.waitLeader(ctx); err != nil {
		return err
	}
	if err := meta.raft.Barrier(n.cfg.CommitTimeout).Error(); err != nil {
		return fmt.Errorf("bootstrap meta group: %w", err)
	}
	v := n.View()
	init := &metav1.InitCluster{ClusterId: v.ClusterID, Replicas: uint32(n.cfg.Replicas)}
	switch {
	case v.Initialized():
		// A retried bootstrap: create exactly what the first try did.
		init.Replicas = uint32(v.Replicas)
		if v.Slotted() {
			init.Slots, init.GroupsPerNode, init.Home = uint32(v.SlotCount), uint32(v.GroupsPerNode), n.cfg.NodeID
		} else {
			init.Shards = uint32(v.Shards)
		}
	case n.cfg.Shards > 0:
		init.ClusterId, init.Shards = id, uint32(n.cfg.Shards)
	default:
		init.ClusterId = id
		init.Slots, init.GroupsPerNode, init.Home = uint32(n.cfg.Slots), uint32(n.cfg.GroupsPerNode), n.cfg.NodeID
	}
	// The first groups: a legacy cluster's shards, or this node's groups
	// of a cluster of slots (ids 0..G-1, fixed by InitCluster).
	groups := int(init.Shards)
	if init.Slots > 0 {
		groups = int(init.GroupsPerNode)
	}
	for s := 0; s < groups; s++ {
		r, err := n.ensureReplica(s)
		if err != nil {
			return err
		}
		if err := r.group.bootstrap([]raft.Server{me}); err != nil {
			return fmt.Errorf("bootstrap group %d: %w", s, err)
		}
	}
	if err := n.applyMeta(ctx, fsm.MetaInitCluster, init); err != nil {
		return err
	}
	if err := n.applyMeta(ctx, fsm.MetaUpsertNode, &metav1.UpsertNode{Node: n.self()}); err != nil {
		return err
	}
	msg := "created cluster"
	if v.Initialized() {
		msg = "single-node cluster resumed" // a restart, or a retried creation
	}
	n.log.Info(msg, "cluster", init.ClusterId, "groups", groups, "slots", init.Slots, "replicas", init.Replicas)
	return nil
}

func newClusterID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// join asks the members at addrs (--join) to add this node, then joins
// their gossip. The meta leader then adds this node to the meta group, and
// shard leaders add it to the shards placed on it.
func (n *Node) join(ctx context.Context, addrs []string) error {
	return n.joinVia(ctx, addrs, "--join")
}

// joinVia is join with the addresses' source (a flag or an API field)
// named in logs and errors. An unreachable member is said so at once and
// retried with backoff until ctx ends; a refusal is final.
func (n *Node) joinVia(ctx context.Context, addrs []string, source string) error {
	if err := markJoining(n.cfg.DataDir, addrs); err != nil {
		return fmt.Errorf("data-dir: recording the join: %w", err)
	}
	start := time.Now()
	var last error
	for attempt := 1; ; attempt++ {
		resolved, err := n.resolveJoin(ctx, addrs)
		if err != nil {
			last = err
		}
		for _, addr := range resolved {
			refused, err := n.joinOnce(ctx, addr)
			if err == nil {
				return nil
			}
			err = withJoinHint(err)
			if refused {
				_ = joined(n.cfg.DataDir) // nothing was taken
				return fmt.Errorf("%s %s refused this node: %w", source, addr, err)
			}
			last = fmt.Errorf("%s: %w", addr, err)
		}
		// 500ms doubling to 5s: a seed that comes up soon is found soon,
		// and a dead one is not hammered.
		wait := backoff(attempt, 500*time.Millisecond, 5*time.Second)
		why := "cannot join the cluster yet: no member answered; retrying"
		if errors.Is(last, ErrMemberAlive) {
			// A member answered: the id is taken by a live node, which
			// this one replaces once it is gone (a rescheduled pod).
			why = "cannot join the cluster yet: a live member has this --node-id; waiting for it to stop (or leave)"
		}
		n.log.Warn(why, "source", source, "addrs", strings.Join(addrs, ","), "attempt", attempt, "retry_in", wait, "err", last)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: no member could add this node in %s (%d attempts): %w; last error: %v",
				source, strings.Join(addrs, ","), time.Since(start).Round(time.Second), attempt, ctx.Err(), last)
		case <-n.stop:
			return ErrClosed
		case <-time.After(wait):
		}
	}
}

// joinAttemptTimeout bounds one member's answer to a join.
const joinAttemptTimeout = 10 * time.Second

// rejoinGossip contacts the members the meta state knows that gossip does
// not see: after a restart, or after a partition long enough for them to
// have given up on each other. At most every few seconds, one contact at
// a time, beside the reconcile loop: memberlist tries the addresses in
// turn, each up to its TCP timeout (10 s), and a dead member's address
// that swallows connections or never answers (a machine gone, an address
// reused) held every pass that long, in line: the dead marking, shard
// reports, slot moves and leadership hand-offs all waited.
func (n *Node) rejoinGossip(v *fsm.MetaView) {
	if time.Since(n.recon.lastRejoin) < rejoinEvery || n.recon.rejoining.Load() {
		return
	}
	var addrs []string
	for _, m := range v.Nodes {
		if m.Id != n.cfg.NodeID && m.GossipAddr != "" && !n.gossip.alive(m.Id) {
			addrs = append(addrs, m.GossipAddr)
		}
	}
	if len(addrs) == 0 {
		return
	}
	n.recon.lastRejoin = time.Now()
	n.recon.rejoining.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.recon.rejoining.Store(false)
		if err := n.gossip.join(addrs); err != nil {
			n.log.Debug("rejoin gossip", "err", err)
		}
	}()
}

// AddNode adds node to the cluster (any node may be asked; the write goes to
// the meta leader) and returns the cluster id and the members' gossip
// addresses. Adding a member again only updates its addresses. proof must
// show the node holds this node's gossip key (ProveGossipKey).
func (n *Node) AddNode(ctx context.Context, node *metav1.Node, proof GossipProof) (string, []string, error) {
	if err := checkNode(node); err != nil {
		return "", nil, err
	}
	if err := checkGossipKey(n.gossipKeys(), node.Id, proof); err != nil {
		return "", nil, err
	}
	v := n.View()
	if !v.Initialized() {
		return "", nil, ErrNotReady
	}
	if old := v.Node(node.Id); old != nil && old.State == metav1.NodeState_NODE_STATE_LEAVING {
		return "", nil, fmt.Errorf("%w: node %s is leaving the cluster", ErrConfig, node.Id)
	}
	if err := n.checkNotImpostor(v.Node(node.Id), node); err != nil {
		return "", nil, err
	}
	if err := checkIncarnation(v.Node(node.Id), node); err != nil {
		return "", nil, err
	}
	add := proto.Clone(node).(*metav1.Node)
	add.State = metav1.NodeState_NODE_STATE_UNSPECIFIED // keep the current state of a known node
	if err := n.applyMeta(ctx, fsm.MetaUpsertNode, &metav1.UpsertNode{Node: add}); err != nil {
		return "", nil, err
	}
	var gossip []string
	for _, m := range n.View().Nodes {
		if m.Id != node.Id && m.GossipAddr != "" {
			gossip = append(gossip, m.GossipAddr)
		}
	}
	return v.ClusterID, gossip, nil
}

// checkNotImpostor refuses new addresses for a member that gossip still
// sees alive at its old ones: a second process started with a live
// member's --node-id would otherwise take its Raft traffic. A member that
// moved (a pod rescheduled with a new IP) is told apart by its old
// process being gone: its announce is refused until gossip calls the old
// address dead, then taken.
func (n *Node) checkNotImpostor(old, node *metav1.Node) error {
	if old == nil || old.GossipAddr == "" || (old.GossipAddr == node.GossipAddr && old.RaftAddr == node.RaftAddr && old.GrpcAddr == node.GrpcAddr) {
		return nil
	}
	if at, alive := n.gossip.aliveAt(node.Id); alive && at == old.GossipAddr && at != node.GossipAddr {
		return fmt.Errorf("%w: node.id: %s is a live member at %s; a node with its id may take its place only once it is gone (or has left)", ErrMemberAlive, node.Id, old.GossipAddr)
	}
	return nil
}

// Fresh reports whether this node may join another cluster: it created a
// cluster of its own (no --join) that never had another member, and holds
// no policies.
func (n *Node) Fresh() bool {
	v := n.View()
	if len(v.Nodes) > 1 || (len(v.Nodes) == 1 && v.Nodes[0].Id != n.cfg.NodeID) || len(v.Policies) > 0 {
		return false
	}
	cfg, err := n.metaGroup().configuration()
	if err != nil {
		return false
	}
	return len(cfg.Servers) <= 1
}

// JoinCluster moves a fresh node into the cluster at addrs: its own
// single-node cluster (and any counts in it) is discarded first, once a
// member of that cluster has answered at one of them (reachCluster).
func (n *Node) JoinCluster(ctx context.Context, addrs []string) (string, error) {
	if len(addrs) == 0 || len(addrs) > maxJoinAddrs {
		return "", fmt.Errorf("%w: addrs: give 1 to %d cluster addresses, got %d", ErrConfig, maxJoinAddrs, len(addrs))
	}
	for i, a := range addrs {
		if err := CheckAddr(fmt.Sprintf("addrs[%d]", i), a); err != nil {
			return "", err
		}
	}
	select {
	case <-n.started:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if !n.Fresh() {
		return "", fmt.Errorf("%w: %s already has other members; only a node that never joined another can", ErrNotFresh, n.cfg.NodeID)
	}
	if err := n.reachCluster(ctx, addrs); err != nil {
		return "", err
	}
	n.recon.pause.Lock()
	defer n.recon.pause.Unlock()
	if !n.Fresh() {
		// Checked again under the lock: a concurrent or retried join may
		// have moved the node already.
		return "", fmt.Errorf("%w: %s already joined a cluster", ErrNotFresh, n.cfg.NodeID)
	}
	// The join is marked before the discard: a node stopped part-way
	// through it (its meta log dropped, no new one yet) finishes the join
	// at its next start, rather than being taken for a member that lost
	// its log (checkStateKept).
	if err := markJoining(n.cfg.DataDir, addrs); err != nil {
		return "", fmt.Errorf("data-dir: recording the join: %w", err)
	}
	if err := n.reset("discarding this node's own single-node cluster to join another"); err != nil {
		return "", err
	}
	if err := n.joinVia(ctx, addrs, "addrs"); err != nil {
		return "", err
	}
	if err := n.waitMember(ctx, true); err != nil {
		return "", err
	}
	if err := joined(n.cfg.DataDir); err != nil {
		return "", fmt.Errorf("data-dir: %w", err)
	}
	// Ready again once its replicas of the cluster it joined caught up.
	n.wg.Add(1)
	go n.watchCaughtUp()
	return n.View().ClusterID, nil
}

// reachCluster asks each of addrs, all at once and for joinCheckTimeout at
// most, which cluster it belongs to, and refuses (ErrNoLeader) unless one
// answers as a member of a cluster other than this node's: JoinCluster
// discards this node's own cluster only then. Before, an address where
// nothing answered (a typo, or a forged call) discarded the node's counts
// and left it joining that address at every start, serving nothing.
func (n *Node) reachCluster(ctx context.Context, addrs []string) error {
	ctx, cancel := context.WithTimeout(ctx, joinCheckTimeout)
	defer cancel()
	resolved, err := n.resolveJoin(ctx, addrs)
	clusters := make([]string, len(resolved))
	var wg sync.WaitGroup
	for i, addr := range resolved {
		wg.Go(func() { clusters[i] = n.clusterAt(ctx, addr) })
	}
	wg.Wait()
	own := n.ownCluster()
	if slices.ContainsFunc(clusters, func(c string) bool { return c != "" && c != own }) {
		return nil
	}
	why := "no member of a cluster answered"
	if err != nil {
		why += fmt.Sprintf(" (%v)", err)
	}
	return fmt.Errorf("%w: addrs: %s at %s within %s; nothing was discarded", ErrNoLeader, why, strings.Join(addrs, ","), joinCheckTimeout)
}

// reset discards the node's own cluster: every group is stopped and its
// data removed, and an empty meta group waits to be added by a leader.
func (n *Node) reset(why string) error {
	n.log.Warn(why)
	n.mu.Lock()
	shards, meta := n.shards, n.meta
	n.shards = map[int]*replica{}
	n.member = false
	n.mu.Unlock()
	n.synced.Store(false) // not ready until caught up with the next cluster
	for _, r := range shards {
		if err := r.destroy(); err != nil {
			return err
		}
	}
	if err := meta.destroy(); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(n.cfg.DataDir, "shards")); err != nil {
		return err
	}
	// Of no cluster now: the one to join must reach it (AdmitPeer).
	if err := forgetCluster(n.cfg.DataDir); err != nil {
		return err
	}
	return n.openMeta()
}

// Leave starts draining node id: it gets no replicas any more, its
// replicas and leaderships move away, and once it holds none the meta
// leader removes it. An empty id means this node.
func (n *Node) Leave(ctx context.Context, id string) error {
	if id == "" {
		id = n.cfg.NodeID
	}
	if n.View().Node(id) == nil {
		return fmt.Errorf("%w: %q", ErrUnknownNode, id)
	}
	return n.applyMeta(ctx, fsm.MetaSetNodeState, &metav1.SetNodeState{Id: id, State: metav1.NodeState_NODE_STATE_LEAVING})
}

// SetPolicies stores named policies in the meta group, all or none.
func (n *Node) SetPolicies(ctx context.Context, ps []*policy.Policy) error {
	c := &metav1.SetPolicies{}
	for _, p := range ps {
		c.Policies = append(c.Policies, p.AppendBinary(nil))
	}
	return n.applyMeta(ctx, fsm.MetaSetPolicies, c)
}

// DeletePolicy removes a named policy. Its counters stay until they expire.
func (n *Node) DeletePolicy(ctx context.Context, name string) error {
	return n.applyMeta(ctx, fsm.MetaDeletePolicy, &metav1.DeletePolicy{Name: name})
}

// CatchUpMeta waits until this node has applied every meta entry the meta
// leader has in its log when asked (so everything it had committed), so a
// write made through any node (a policy just set) is visible here. That
// holds on the leader itself too: one just elected after a restart may not
// have applied what its predecessors committed yet. It writes nothing, and
// gives up at ctx's deadline.
func (n *Node) CatchUpMeta(ctx context.Context) error {
	meta := n.metaGroup()
	if meta == nil {
		return ErrClosed
	}
	// The leader's log holds every committed entry (and a few in flight,
	// which commit shortly): once this node's meta state has seen the
	// leader's latest command, nothing committed before the question is
	// missing here. Callers waiting together share one question
	// (metaTargets).
	target := meta.lastCommand()
	if !meta.isLeader() {
		var err error
		if target, err = n.targets.get(ctx); err != nil {
			return err
		}
	}
	for n.metaState().Seen() < target {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// applyMeta applies a meta command, on the meta leader: locally when this
// node leads, otherwise forwarded. Meta commands are idempotent, so
// retrying one whose outcome was unknown is safe.
func (n *Node) applyMeta(ctx context.Context, typ byte, msg proto.Message) error {
	cmd, err := fsm.EncodeMeta(typ, msg)
	if err != nil {
		return err
	}
	return n.ApplyMeta(ctx, cmd)
}

// ApplyMeta applies an encoded meta command on the meta leader, retrying
// until ctx ends while there is no leader or leadership moves.
func (n *Node) ApplyMeta(ctx context.Context, cmd []byte) error {
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("meta write: %w (last error: %v)", ctx.Err(), last)
			case <-n.stop:
				return ErrClosed
			case <-time.After(backoff(attempt, 20*time.Millisecond, 500*time.Millisecond)):
			}
		}
		meta := n.metaGroup()
		if meta == nil {
			return ErrClosed
		}
		if meta.isLeader() {
			last = n.applyLocalMeta(meta, cmd)
			if last == nil || MetaRefused(last) {
				return last
			}
			continue
		}
		leader := meta.leader()
		addr := n.addrOf(leader)
		if addr == "" {
			last = fmt.Errorf("meta group: %w", ErrNoLeader)
			continue
		}
		last = whileLeads(ctx, leader, meta.leader, func(ctx context.Context) error {
			return n.peers.ApplyMeta(ctx, addr, cmd)
		})
		if last == nil || MetaRefused(last) {
			return last
		}
	}
}

// ApplyLocalMeta applies cmd, sent by a peer, if this node leads the meta
// group. A malformed command is refused on any node; one the state would
// refuse, or that names what it does not hold (checkPeerMeta), by the
// leader before it is logged (see checkMeta).
func (n *Node) ApplyLocalMeta(ctx context.Context, cmd []byte) error {
	meta := n.metaGroup()
	if meta == nil {
		return ErrClosed
	}
	verdict := n.checkMeta(cmd)
	if errors.Is(verdict, ErrConfig) {
		return verdict
	}
	if !meta.isLeader() {
		return &NotLeaderError{Group: "meta", LeaderID: meta.leader(), LeaderAddr: n.addrOf(meta.leader())}
	}
	if verdict != nil {
		return verdict
	}
	if err := n.checkPeerMeta(ctx, cmd); err != nil {
		return err
	}
	return n.applyLocalMeta(meta, cmd)
}

func (n *Node) applyLocalMeta(meta *Group, cmd []byte) error {
	if len(cmd) > 0 && cmd[0] == fsm.MetaSetNodeState {
		n.stateMu.Lock() // see setState
		defer n.stateMu.Unlock()
	}
	if len(cmd) > 0 && (cmd[0] == fsm.MetaUpsertNode || cmd[0] == fsm.MetaSetPolicies) {
		n.capMu.Lock()
		defer n.capMu.Unlock()
		if err := n.checkCaps(cmd); err != nil {
			return err
		}
	}
	return n.applyLocalMetaLocked(meta, cmd)
}

// applyLocalMetaLocked is applyLocalMeta for a caller that holds stateMu
// if cmd sets a node's state.
func (n *Node) applyLocalMetaLocked(meta *Group, cmd []byte) error {
	f := meta.raft.Apply(cmd, n.cfg.CommitTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			return &NotLeaderError{Group: "meta", LeaderID: meta.leader()}
		}
		return fmt.Errorf("meta group: %w: %w", ErrUnavailable, err)
	}
	// The followers learn that cmd committed from the next entry the
	// leader sends: send one now (a barrier, which no state machine sees)
	// rather than after the idle commit timeout, so every node's copy of
	// the meta state follows within a round trip. Nobody waits for it.
	meta.raft.Barrier(n.cfg.CommitTimeout)
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// addrOf returns the gRPC address of node id, or "".
func (n *Node) addrOf(id string) string {
	if id == "" {
		return ""
	}
	if m := n.View().Node(id); m != nil {
		return m.GrpcAddr
	}
	return ""
}

// backoff is the wait before retry attempt (1, 2, ...): first, doubling
// up to ceiling.
func backoff(attempt int, first, ceiling time.Duration) time.Duration {
	d := first
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}
