package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
)

// replica is this node's copy of one shard: its Raft group, state machine
// and group-commit batcher.
type replica struct {
	id      int
	group   *Group
	fsm     *fsm.Shard
	batcher *batcher
	fast    *fastLane
	// watching holds the planned moves out of the group whose slot watch
	// this node started on the replica (watchMoves).
	watchMu  sync.Mutex
	watching map[uint64]bool
}

func shardName(id int) string { return fmt.Sprintf("shard-%d", id) }

func (n *Node) shardDir(id int) string {
	return filepath.Join(n.cfg.DataDir, "shards", strconv.Itoa(id))
}

// replica returns the local replica of shard id, or nil.
func (n *Node) replica(id int) *replica {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.shards[id]
}

// replicas returns the local replicas.
func (n *Node) replicas() []*replica {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]*replica, 0, len(n.shards))
	for _, r := range n.shards {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *replica) int { return a.id - b.id })
	return out
}

// ensureReplica returns the local replica of shard id, opening (and
// creating) it if needed. A new replica waits for its leader to add it.
func (n *Node) ensureReplica(id int) (*replica, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	if r := n.shards[id]; r != nil {
		return r, nil
	}
	if n.dropping[id] {
		return nil, errDropping
	}
	f := fsm.NewShard()
	g, err := openGroup(groupOptions{
		name: shardName(id), dir: n.shardDir(id), nodeID: n.cfg.NodeID,
		fsm: f, mux: n.mux, rnet: n.rnet, wal: n.wal, grid: n.grid, onLeader: n.leaderChanged, cfg: n.cfg, addrs: addrBook{n},
	})
	if err != nil {
		return nil, err
	}
	r := &replica{id: id, group: g, fsm: f}
	notLeader := func() error { return n.notLeader(r) }
	r.batcher = newBatcher(g.name, g.raft, n.cfg, n.stamp, notLeader, n.room)
	r.fast = newFastLane(g.raft, f, n.cfg, n.stamp, notLeader)
	n.shards[id] = r
	return r, nil
}

// finishDestroys finishes the deletions of replicas that a crash
// interrupted after their directory was renamed (Group.destroy): their
// logs are dropped from the shared log and their files removed. A group
// opened again (the meta group after a reset, a replica placed here
// again) finishes its own first (openGroup); this frees the rest.
func (n *Node) finishDestroys() error {
	dir := filepath.Join(n.cfg.DataDir, "shards")
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), destroyingSuffix)
		id, err := strconv.Atoi(name)
		if !ok || err != nil {
			continue
		}
		if err := removeDestroyed(n.wal, shardName(id), filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("finish deleting %s: %w", e.Name(), err)
		}
		n.log.Warn("finished deleting a replica that a crash interrupted", "group", shardName(id))
	}
	return nil
}

// openExistingReplicas reopens every shard replica found in the data dir.
func (n *Node) openExistingReplicas() error {
	entries, err := os.ReadDir(filepath.Join(n.cfg.DataDir, "shards"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		if _, err := n.ensureReplica(id); err != nil {
			return err
		}
	}
	return nil
}

// notLeader is the error for a check this node cannot serve for r's shard,
// with the leader this node knows of as a hint.
func (n *Node) notLeader(r *replica) error {
	id := r.group.leader()
	if id == n.cfg.NodeID {
		id = ""
	}
	return &NotLeaderError{Group: r.group.name, LeaderID: id, LeaderAddr: n.addrOf(id)}
}

func (r *replica) close(handOff bool) {
	r.fast.refuse()
	if handOff && r.group.isLeader() {
		// A clean shutdown (a deploy) replicates every fast decision it
		// answered before it hands the shard over: nothing is lost.
		r.fast.drain()
	}
	r.fast.close()
	r.batcher.close()
	_ = r.group.close(handOff)
}

func (r *replica) destroy() error {
	r.fast.close()
	r.batcher.close()
	return r.group.destroy()
}

// manageReplicas opens the replicas placed on this node and deletes those
// that have been moved away. A replica is deleted only once Raft shut it
// down on its removal, or the shard's current leader confirms it is not in
// the group's configuration: never merely because the placement changed or
// a report says so, since until the leader has removed it the replica may
// be needed for a quorum.
func (n *Node) manageReplicas(v *fsm.MetaView, pl *placement) {
	me := n.cfg.NodeID
	for s := range pl.shards {
		if slices.Contains(pl.shards[s], me) {
			r, err := n.ensureReplica(s)
			if errors.Is(err, errDropping) {
				continue // placed here again: opened once the deletion is done
			}
			if err != nil {
				n.log.Error("open shard replica", "shard", s, "err", err)
				continue
			}
			n.maybeBootstrapGroup(v, r)
		}
	}
	for _, r := range n.replicas() {
		if r.id < len(pl.shards) && slices.Contains(pl.shards[r.id], me) {
			continue
		}
		if v := n.View(); v.Slotted() && v.Group(uint32(r.id)) == nil && r.id < len(v.Reports) {
			// The group was removed: it owned no slot, and nothing will
			// ever route to it again. Every replica goes, leader included.
			n.dropReplica(r)
			continue
		}
		if time.Since(r.group.openedAt) < 2*n.cfg.ElectionTimeout || r.group.isLeader() {
			continue // just opened, or leading: it hands leadership over first
		}
		if r.group.raft.State() == raft.Shutdown {
			n.dropReplica(r)
			continue
		}
		n.spawn(confirmKey+r.id, func(ctx context.Context) {
			if n.removedByLeader(ctx, r) {
				n.dropReplica(r)
			}
		})
	}
}

// maybeBootstrapGroup starts a group the meta state added (a node joined):
// its home, and only its home, makes it a one-server Raft group, which
// then adds the other replicas like any leader does. Only a group that
// never reported a leader is started: one that did exists already, and a
// home that lost its data must not start a second copy of it.
func (n *Node) maybeBootstrapGroup(v *fsm.MetaView, r *replica) {
	g := v.Group(uint32(r.id))
	if !v.Slotted() || g == nil || g.Home != n.cfg.NodeID || r.id >= len(v.Reports) || v.Reports[r.id] != nil {
		return
	}
	if has, err := r.group.hasState(); err != nil || has {
		return
	}
	if !n.metaReplayed() {
		// A group added, then removed, by this node's earlier life (a
		// restart replays both): starting it here would be a second one.
		return
	}
	me := raft.Server{ID: raft.ServerID(n.cfg.NodeID), Address: raft.ServerAddress(n.cfg.RaftAddr)}
	if err := r.group.bootstrap([]raft.Server{me}); err != nil {
		n.log.Error("start new group", "group", r.id, "err", err)
		return
	}
	n.log.Info("started new group", "group", r.id)
}

// confirmKey offsets the reconciler's busy keys for removal checks.
const confirmKey = 1 << 20

// removedByLeader asks the shard's leader whether this node is still in the
// group's configuration.
func (n *Node) removedByLeader(ctx context.Context, r *replica) bool {
	info, err := n.leaderProgress(ctx, r)
	return err == nil && !slices.Contains(info.Servers, n.cfg.NodeID)
}

// leaderProgress asks the leader of r's group for its progress: the leader
// r has heard from or, when it has heard from none since its start, the
// one the meta group's reports name. ErrNoLeader when there is none, or
// it no longer leads.
func (n *Node) leaderProgress(ctx context.Context, r *replica) (GroupInfo, error) {
	leader := r.group.leader()
	if leader == "" || leader == n.cfg.NodeID {
		if v := n.View(); r.id < len(v.Reports) && v.Reports[r.id] != nil {
			leader = v.Reports[r.id].Leader
		}
	}
	addr := n.addrOf(leader)
	if leader == "" || leader == n.cfg.NodeID || addr == "" {
		return GroupInfo{}, ErrNoLeader
	}
	info, err := n.peers.Progress(ctx, addr, r.id)
	if err == nil && !info.Leader {
		err = fmt.Errorf("%w: %s no longer leads it", ErrNoLeader, leader)
	}
	return info, err
}

// dropReplica closes and deletes a replica that has moved away.
func (n *Node) dropReplica(r *replica) {
	n.mu.Lock()
	if n.shards[r.id] != r {
		n.mu.Unlock()
		return
	}
	delete(n.shards, r.id)
	n.dropping[r.id] = true
	n.mu.Unlock()
	n.log.Info("shard replica moved away: deleting it", "shard", r.id)
	if err := r.destroy(); err != nil {
		n.log.Error("delete shard replica", "shard", r.id, "err", err)
	}
	n.mu.Lock()
	delete(n.dropping, r.id)
	n.mu.Unlock()
}

// errDropping refuses to open a replica whose earlier one is being
// deleted; the reconciler opens it at a later pass.
var errDropping = errors.New("its earlier replica is being deleted")
