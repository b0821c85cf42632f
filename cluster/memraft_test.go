package cluster

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
)

// memGroup is a shard's Raft group of in-memory replicas (stores and
// transport), for unit tests of the pieces built on a *raft.Raft. Nothing
// in it touches the network or the disk, so it runs inside a
// testing/synctest bubble on fake time: elections, heartbeats and commit
// timeouts take no wall time and cannot flake.
type memGroup struct {
	rafts  []*raft.Raft
	shards []*fsm.Shard
	trans  []*raft.InmemTransport

	mu   sync.Mutex
	sent []heartbeat // the heartbeats leaders sent

	// slowTimeoutNow delays every TimeoutNow (ns), as a transfer target
	// whose raft loop is busy, or a congested link, would.
	slowTimeoutNow atomic.Int64
}

// heartbeat is one heartbeat a leader sent.
type heartbeat struct {
	from, to int
	at       time.Time
}

// memTransport is a replica's transport that records its heartbeats.
type memTransport struct {
	*raft.InmemTransport
	g    *memGroup
	from int
}

func (m *memTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	time.Sleep(time.Duration(m.g.slowTimeoutNow.Load()))
	return m.InmemTransport.TimeoutNow(id, target, args, resp)
}

func (m *memTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if len(args.Entries) == 0 && args.PrevLogEntry == 0 && args.LeaderCommitIndex == 0 {
		var to int
		fmt.Sscanf(string(target), "r%d", &to)
		m.g.mu.Lock()
		m.g.sent = append(m.g.sent, heartbeat{from: m.from, to: to, at: time.Now()})
		m.g.mu.Unlock()
	}
	return m.InmemTransport.AppendEntries(id, target, args, resp)
}

// heartbeats returns the heartbeats sent since the last call.
func (g *memGroup) heartbeats() []heartbeat {
	g.mu.Lock()
	defer g.mu.Unlock()
	hb := g.sent
	g.sent = nil
	return hb
}

// newMemGroup starts n replicas, bootstraps them as one group and waits
// for a leader.
func newMemGroup(t *testing.T, n int) *memGroup {
	t.Helper()
	g := &memGroup{}
	var servers []raft.Server
	addrs := make([]raft.ServerAddress, n)
	for i := range n {
		addrs[i], _ = raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("r%d", i)))
	}
	for i := range n {
		_, tr := raft.NewInmemTransport(addrs[i])
		g.trans = append(g.trans, tr)
		servers = append(servers, raft.Server{ID: raft.ServerID(addrs[i]), Address: addrs[i]})
	}
	for i := range g.trans {
		for j := range g.trans {
			if i != j {
				g.trans[i].Connect(addrs[j], g.trans[j])
			}
		}
	}
	for i := range n {
		rc := raft.DefaultConfig()
		rc.LocalID = raft.ServerID(addrs[i])
		rc.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
		rc.HeartbeatTimeout = 100 * time.Millisecond
		rc.ElectionTimeout = 100 * time.Millisecond
		rc.LeaderLeaseTimeout = 50 * time.Millisecond
		rc.BatchApplyCh = true
		s := fsm.NewShard()
		r, err := raft.NewRaft(rc, s, raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore(), &memTransport{g.trans[i], g, i})
		if err != nil {
			t.Fatal(err)
		}
		g.rafts, g.shards = append(g.rafts, r), append(g.shards, s)
	}
	if err := g.rafts[0].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	g.waitLeader(t)
	return g
}

// leader returns the index of the current leader, or -1.
func (g *memGroup) leader() int {
	for i, r := range g.rafts {
		if r.State() == raft.Leader {
			return i
		}
	}
	return -1
}

// waitLeader waits (in fake time) for a leader and returns its index.
func (g *memGroup) waitLeader(t *testing.T) int {
	t.Helper()
	for range 1000 {
		if i := g.leader(); i >= 0 {
			return i
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader elected")
	return -1
}

// close shuts every replica down, so the bubble's goroutines end.
func (g *memGroup) close() {
	for _, r := range g.rafts {
		_ = r.Shutdown().Error()
	}
	for _, tr := range g.trans {
		_ = tr.Close()
	}
}
