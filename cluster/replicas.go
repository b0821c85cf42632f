package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	f := fsm.NewShard()
	g, err := openGroup(groupOptions{
		name: shardName(id), dir: n.shardDir(id), nodeID: n.cfg.NodeID,
		fsm: f, mux: n.mux, syncer: n.syncer, cfg: n.cfg,
	})
	if err != nil {
		return nil, err
	}
	r := &replica{id: id, group: g, fsm: f}
	notLeader := func() error { return n.notLeader(r) }
	r.batcher = newBatcher(g.name, g.raft, n.cfg, notLeader, n.room)
	r.fast = newFastLane(g.raft, f, n.cfg, notLeader)
	n.shards[id] = r
	return r, nil
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
// that have been moved away. A replica is deleted only once its shard's
// leader has reported a configuration without this node (or Raft itself
// shut the replica down on removal), never merely because the placement
// changed: until the leader has removed it, it may be needed for a quorum.
func (n *Node) manageReplicas(pl *placement) {
	me := n.cfg.NodeID
	for s := range pl.shards {
		if slices.Contains(pl.shards[s], me) {
			if _, err := n.ensureReplica(s); err != nil {
				n.log.Error("open shard replica", "shard", s, "err", err)
			}
		}
	}
	v := n.View()
	for _, r := range n.replicas() {
		if r.id < len(pl.shards) && slices.Contains(pl.shards[r.id], me) {
			continue
		}
		removed := r.group.raft.State() == raft.Shutdown
		if !removed && r.id < len(v.Reports) {
			rep := v.Reports[r.id]
			removed = rep != nil && rep.Term >= r.group.raft.CurrentTerm() && !reportHas(rep.Replicas, me) && time.Since(r.group.openedAt) > n.cfg.ElectionTimeout
		}
		if !removed {
			continue
		}
		n.mu.Lock()
		if n.shards[r.id] == r {
			delete(n.shards, r.id)
		}
		n.mu.Unlock()
		n.log.Info("shard replica moved away: deleting it", "shard", r.id)
		if err := r.destroy(); err != nil {
			n.log.Error("delete shard replica", "shard", r.id, "err", err)
		}
	}
}
