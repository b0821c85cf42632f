package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/raftlog"
	"github.com/floodgate/floodgate/raftnet"
)

// Group is one Raft group on this node: the meta group or one shard. Its
// log and snapshots live in their own directory; its transport is a stream
// layer of the node's shared Raft port.
type Group struct {
	name     string
	dir      string
	openedAt time.Time
	raft     *raft.Raft
	store    *groupStore
	trans    groupTransport
	pace     *pacer
	keep     *retainer      // its log retention by bytes; nil without a shared log
	wal      *raftlog.Store // the node's shared log, holding this group's
}

type groupOptions struct {
	name   string
	dir    string
	nodeID string
	fsm    raft.FSM
	mux    *Mux
	rnet   *raftnet.Network // nil: the legacy transport
	wal    *raftlog.Store
	grid   *grid // the node's heartbeat clock
	// onLeader is called when the group's leader changes (from the
	// pacer's goroutine; it must not block).
	onLeader func()
	cfg      Config
	addrs    raft.ServerAddressProvider // nil: the configuration's addresses
}

// idleCommitTimeout is how often a leader with nothing new to replicate
// tells its followers the commit index.
const idleCommitTimeout = time.Second

// openGroup opens (or creates) the group's stores and starts its Raft
// instance. A new group waits to be bootstrapped or added by a leader.
func openGroup(o groupOptions) (*Group, error) {
	logger := hclogFor(o.cfg.Logger, o.name)
	// A deletion of an earlier replica of this group that failed part-way
	// is finished first: its log must not be dropped once this one has
	// one (Node.finishDestroys would at the next start), nor this one
	// start on what is left of it.
	if tomb := o.dir + destroyingSuffix; exists(tomb) {
		if err := removeDestroyed(o.wal, o.name, tomb); err != nil {
			return nil, fmt.Errorf("finish deleting %s: %w", tomb, err)
		}
	}
	store, err := openGroupStore(o.dir, o.name, o.wal, logger)
	if err != nil {
		return nil, err
	}
	trans, err := openTransport(o, logger)
	if err != nil {
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(o.nodeID)
	rc.Logger = logger
	rc.HeartbeatTimeout = o.cfg.HeartbeatTimeout
	rc.ElectionTimeout = o.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = o.cfg.LeaderLeaseTimeout
	rc.BatchApplyCh = true
	// With nothing new to send, a leader still sends every follower an
	// AppendEntries each CommitTimeout (raft's default 50ms) only to tell
	// it the commit index: on an idle cluster, as many messages as the
	// heartbeats. A shard's followers need the commit index only to apply
	// late (nobody reads them), and the next entry carries it; the meta
	// group, whose every copy is read, follows each write with a barrier
	// entry that carries it at once (applyLocalMeta).
	rc.CommitTimeout = idleCommitTimeout
	// Shard entries carry whole batches: snapshot often enough that the
	// log a restart replays, and a lagging replica catches up on, stays
	// small.
	rc.SnapshotThreshold = 4096
	rc.SnapshotInterval = 20 * time.Second
	rc.TrailingLogs = 2048
	r, err := raft.NewRaft(rc, o.fsm, store.logs, store.state, store.snaps, trans)
	if err != nil {
		trans.Close()
		return nil, fmt.Errorf("start raft group %s: %w", o.name, err)
	}
	if w, ok := trans.(interface{ Await(func() bool) }); ok {
		// Replication waits for a follower it cannot reach, so that
		// raft's backoff does not delay it long after the follower is
		// back (raftnet/await.go); only while leading, since a shutdown
		// waits for it.
		w.Await(func() bool { return r.State() == raft.Leader })
	}
	g := &Group{name: o.name, dir: o.dir, openedAt: time.Now(), raft: r, store: store, trans: trans, wal: o.wal,
		pace: startPacer(r, raft.ServerID(o.nodeID), groupKind(o.name), followerTiming(rc), o.grid, o.onLeader)}
	if log, ok := store.state.(sizedLog); ok {
		g.keep = &retainer{raft: r, pace: g.pace, log: log}
	}
	return g, nil
}

// groupKind is the metrics label of a group: meta, or shard.
func groupKind(name string) string {
	if name == metaName {
		return "meta"
	}
	return "shard"
}

// hasState reports whether the group has ever been bootstrapped or joined.
func (g *Group) hasState() (bool, error) {
	return raft.HasExistingState(g.store.logs, g.store.state, g.store.snaps)
}

// bootstrap makes the group a new cluster of servers.
func (g *Group) bootstrap(servers []raft.Server) error {
	err := g.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err == raft.ErrCantBootstrap {
		return nil // already bootstrapped: a restart after a crash mid-way
	}
	return err
}

// lastCommand returns the index of the latest command entry in the
// group's log (0 if the newest entries hold none): raft's no-op, barrier
// and configuration entries never reach the state machine, so waiting for
// the state machine to see the log's last index could wait forever.
func (g *Group) lastCommand() uint64 {
	last := g.raft.LastIndex()
	first, err := g.store.logs.FirstIndex()
	if err != nil {
		return 0
	}
	var l raft.Log
	for i := last; i >= max(first, 1) && last-i < 256; i-- {
		if g.store.logs.GetLog(i, &l) == nil && l.Type == raft.LogCommand {
			return i
		}
	}
	return 0
}

// isLeader reports whether this node leads the group.
func (g *Group) isLeader() bool { return g.raft.State() == raft.Leader }

// leader returns the id of the group's leader as this node knows it.
func (g *Group) leader() string {
	_, id := g.raft.LeaderWithID()
	return string(id)
}

// silentLeader reports whether this replica follows a leader it has not
// heard from for longer than d.
func (g *Group) silentLeader(d time.Duration) bool {
	if g.raft.State() != raft.Follower {
		return false
	}
	last := g.raft.LastContact()
	return !last.IsZero() && time.Since(last) > d
}

// configuration returns the latest configuration. (hashicorp/raft v1.7.3
// does not fill in its log index, so membership changes pass prevIndex 0,
// "no check"; each group's changes come from one reconciler at a time.)
func (g *Group) configuration() (raft.Configuration, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, err
	}
	return f.Configuration(), nil
}

// waitLeader waits until the group has a leader.
func (g *Group) waitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for g.leader() == "" {
		select {
		case <-ctx.Done():
			return fmt.Errorf("group %s: %w: %w", g.name, ErrNoLeader, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// transferLeadership hands the group's leadership to voter to (to any
// voter when to is nil) and waits for the outcome until ctx ends, and at
// most three election timeouts (raft's own bound on a transfer, twice,
// plus room). The bound matters: hashicorp/raft can take a transfer
// request into its buffered channel after the group shut down (a leader
// removed from its group shuts itself down) and then never answer it, and
// an unbounded wait there held up Node.Close for good. The transfer runs
// on the follower timing (pacer.handOff): raft refuses the group's writes
// until it ends, for at most the configured election timeout.
func (g *Group) transferLeadership(ctx context.Context, to *raft.Server) error {
	return g.pace.handOff(func() error {
		var f raft.Future
		if to == nil {
			f = g.raft.LeadershipTransfer()
		} else {
			f = g.raft.LeadershipTransferToServer(to.ID, to.Address)
		}
		ctx, cancel := context.WithTimeout(ctx, 3*g.raft.ReloadableConfig().ElectionTimeout)
		defer cancel()
		return awaitFuture(ctx, f)
	})
}

// close stops the group, handing leadership away first when it leads, so
// a clean shutdown or a deploy costs the group no election timeout.
func (g *Group) close(handOff bool) error {
	if handOff && g.isLeader() {
		_ = g.transferLeadership(context.Background(), nil)
	}
	err := g.raft.Shutdown().Error()
	if g.keep != nil {
		g.keep.close() // a snapshot asked for is refused once raft is down
	}
	g.pace.close()
	if cerr := g.trans.Close(); err == nil {
		err = cerr
	}
	return err
}

// destroy stops the group and deletes its data: the replica has moved away.
// The directory is first renamed out of the replicas' names (a tombstone,
// durably), then the group's log dropped, then the directory removed: a
// crash part-way through a removal left a snapshot's metadata without its
// state, which Raft refuses to open, so the node could not start; or the
// whole directory, reopened as a replica with no log. A crash after the
// rename is finished at the next start (openGroup for a group opened
// again, else Node.finishDestroys).
func (g *Group) destroy() error {
	err := g.close(false)
	tomb := g.dir + destroyingSuffix
	// A tombstone of an earlier life of this group that a failure left:
	// a rename does not replace a directory that holds anything.
	if rerr := os.RemoveAll(tomb); rerr != nil {
		return errors.Join(err, rerr)
	}
	if rerr := os.Rename(g.dir, tomb); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return errors.Join(err, rerr)
	}
	if serr := raftlog.SyncDir(filepath.Dir(g.dir)); serr != nil {
		return errors.Join(err, serr)
	}
	return errors.Join(err, removeDestroyed(g.wal, g.name, tomb))
}

// destroyingSuffix marks a replica's directory being deleted.
const destroyingSuffix = ".destroying"

// removeDestroyed drops group name's log from wal and removes its renamed
// directory tomb, durably.
func removeDestroyed(wal *raftlog.Store, name, tomb string) error {
	if err := wal.Drop(name); err != nil {
		return err
	}
	if err := os.RemoveAll(tomb); err != nil {
		return err
	}
	return raftlog.SyncDir(filepath.Dir(tomb))
}

// hclogFor returns an hclog.Logger for Raft that writes through slog at
// warning level: Raft's info lines (elections, heartbeats) are noise at
// dozens of groups per node.
func hclogFor(l *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.Warn,
		Output:      &slogWriter{log: l, prefix: "raft: "},
		DisableTime: true,
	})
}

// exists reports whether path names a file or directory.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
