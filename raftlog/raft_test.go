package raftlog

import (
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// sumFSM adds up the commands it applies.
type sumFSM struct {
	mu  sync.Mutex
	n   int
	sum uint64
}

func (f *sumFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.sum += uint64(l.Data[0])
	return nil
}

func (f *sumFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &sumSnap{fmt.Sprintf("%d %d", f.n, f.sum)}, nil
}

func (f *sumFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := fmt.Fscan(r, &f.n, &f.sum)
	return err
}

func (f *sumFSM) get() (int, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.sum
}

type sumSnap struct{ s string }

func (s *sumSnap) Persist(sink raft.SnapshotSink) error {
	if _, err := io.WriteString(sink, s.s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (s *sumSnap) Release() {}

// node is one process: a store shared by its groups, one raft per group.
type node struct {
	store *Store
	rafts map[string]*raft.Raft
	fsms  map[string]*sumFSM
}

func startNodes(t *testing.T, dirs []string, groups []string, boot bool) []*node {
	t.Helper()
	nodes := make([]*node, len(dirs))
	trans := map[string][]*raft.InmemTransport{}
	for _, g := range groups {
		for i := range dirs {
			_, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("%s-%d", g, i)))
			trans[g] = append(trans[g], tr)
		}
		for _, a := range trans[g] {
			for _, b := range trans[g] {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	for i, dir := range dirs {
		s, err := Open(dir, Options{SegmentSize: 32 << 10})
		if err != nil {
			t.Fatal(err)
		}
		n := &node{store: s, rafts: map[string]*raft.Raft{}, fsms: map[string]*sumFSM{}}
		nodes[i] = n
		for _, g := range groups {
			c := raft.DefaultConfig()
			c.LocalID = raft.ServerID(fmt.Sprint(i))
			// Real time: long enough that a leader keeps its lease while
			// the race detector and other test binaries stall this one
			// (at 50 ms a leader stepped down under load, failing Apply).
			c.HeartbeatTimeout, c.ElectionTimeout = time.Second, time.Second
			c.LeaderLeaseTimeout, c.CommitTimeout = 500*time.Millisecond, 5*time.Millisecond
			c.SnapshotThreshold, c.TrailingLogs = 1<<30, 10
			c.Logger = hclog.NewNullLogger()
			logs, err := raft.NewLogCache(16, s.Group(g))
			if err != nil {
				t.Fatal(err)
			}
			snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, g), 2, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			fsm := &sumFSM{}
			r, err := raft.NewRaft(c, fsm, logs, s.Group(g), snaps, trans[g][i])
			if err != nil {
				t.Fatal(err)
			}
			if boot && i == 0 {
				var servers []raft.Server
				for j := range dirs {
					servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprint(j)), Address: trans[g][j].LocalAddr()})
				}
				if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
					t.Fatal(err)
				}
			}
			n.rafts[g], n.fsms[g] = r, fsm
		}
	}
	return nodes
}

func stopNodes(t *testing.T, nodes []*node) {
	for _, n := range nodes {
		for _, r := range n.rafts {
			if err := r.Shutdown().Error(); err != nil {
				t.Error(err)
			}
		}
		n.store.Close()
	}
}

func leaderOf(t *testing.T, nodes []*node, g string) *raft.Raft {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.rafts[g].State() == raft.Leader {
				return n.rafts[g]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("group %s elected no leader", g)
	return nil
}

// Real hashicorp/raft groups, three nodes, two groups sharing each node's
// store: replicate, snapshot and truncate, restart every node, and the
// state comes back from the shared logs.
func TestRaftGroupsOnSharedLog(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	groups := []string{"meta", "shard-0"}
	nodes := startNodes(t, dirs, groups, true)
	want := map[string]uint64{}
	apply := func(from, to int) {
		for _, g := range groups {
			r := leaderOf(t, nodes, g)
			for i := from; i < to; i++ {
				if err := r.Apply([]byte{byte(i)}, 5*time.Second).Error(); err != nil {
					t.Fatalf("apply to %s: %v", g, err)
				}
				want[g] += uint64(byte(i))
			}
		}
	}
	apply(0, 150)
	for _, n := range nodes {
		if err := n.rafts["shard-0"].Snapshot().Error(); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
	}
	apply(150, 200)
	if err := leaderOf(t, nodes, "meta").Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	first, _ := nodes[0].store.Group("shard-0").FirstIndex()
	if first < 100 {
		t.Fatalf("shard-0 FirstIndex %d after a snapshot: the log was not truncated", first)
	}
	stopNodes(t, nodes)

	nodes = startNodes(t, dirs, groups, false)
	defer stopNodes(t, nodes)
	for _, g := range groups {
		if err := leaderOf(t, nodes, g).Barrier(5 * time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for _, n := range nodes {
			for {
				_, sum := n.fsms[g].get()
				if sum == want[g] {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("group %s after restart: sum %d, want %d", g, sum, want[g])
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}
