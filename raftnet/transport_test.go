package raftnet

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Three nodes running several groups over raftnet elect leaders and
// replicate every group's entries to every node, in order.
func TestGroupsReplicateOverLinks(t *testing.T) {
	groups := []string{"meta", "shard-0", "shard-1", "shard-2"}
	nodes := cluster(t, 3, groups...)
	for _, g := range groups {
		l := leaderOf(t, nodes, g)
		var want []string
		for i := range 200 {
			cmd := fmt.Sprintf("%s-%d", g, i)
			want = append(want, cmd)
			f := l.rafts[g].Apply([]byte(cmd), 5*time.Second)
			if i%50 == 49 {
				if err := f.Error(); err != nil {
					t.Fatalf("%s: apply: %v", g, err)
				}
			}
		}
		if err := l.rafts[g].Barrier(5 * time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			eventually(t, 5*time.Second, n.id+" applies "+g, func() error {
				if got := n.fsms[g].applied(); !slices.Equal(got, want) {
					return fmt.Errorf("applied %d of %d", len(got), len(want))
				}
				return nil
			})
		}
	}
	// One link to each peer a node leads, whatever the groups.
	for _, n := range nodes {
		n.net.mu.Lock()
		links := len(n.net.links)
		n.net.mu.Unlock()
		if links > len(nodes)-1 {
			t.Errorf("%s has %d links, want at most %d", n.id, links, len(nodes)-1)
		}
	}
}

// A node added to groups that have compacted their logs catches up by
// snapshot (on a connection of its own) while the links keep carrying the
// other groups' traffic, and nothing stalls.
func TestNewReplicaCatchesUpBySnapshot(t *testing.T) {
	groups := []string{"meta", "shard-0", "shard-1"}
	nodes := cluster(t, 2, groups...)
	for _, g := range groups {
		l := leaderOf(t, nodes, g)
		for i := range 300 {
			l.rafts[g].Apply([]byte(fmt.Sprintf("%s-%d", g, i)), 5*time.Second)
		}
		if err := l.rafts[g].Barrier(5 * time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		if err := l.rafts[g].Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	n3 := newNode(t, "n3")
	t.Cleanup(n3.stop)
	for _, g := range groups {
		n3.start(t, g, nil)
		l := leaderOf(t, nodes, g)
		if err := l.rafts[g].AddVoter("n3", n3.addr(), 0, 5*time.Second).Error(); err != nil {
			t.Fatalf("%s: add n3: %v", g, err)
		}
	}
	nodes = append(nodes, n3)
	for _, g := range groups {
		l := leaderOf(t, nodes, g)
		start := time.Now()
		if err := l.rafts[g].Apply([]byte(g+"-last"), 5*time.Second).Error(); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: an entry took %s to commit", g, took)
		}
		eventually(t, 5*time.Second, "n3 applies "+g, func() error {
			got := n3.fsms[g].applied()
			if len(got) != 301 || got[300] != g+"-last" {
				return fmt.Errorf("n3 applied %d entries of %s", len(got), g)
			}
			return nil
		})
	}
}

// A cluster where one node runs an older release (NetworkTransport only,
// its mux closes raftnet connections) works: the raftnet nodes reach it,
// and it reaches them, through NetworkTransport, and talk raftnet among
// themselves. A rolling upgrade runs both side by side.
func TestOlderReleasePeerIsReachedThroughTheFallback(t *testing.T) {
	muxes := []*testMux{newTestMux(t, true), newTestMux(t, true), newTestMux(t, false)}
	var rafts []*raft.Raft
	var fsms []*kv
	var nets []*Network
	var servers []raft.Server
	for i, m := range muxes {
		id := raft.ServerID([]string{"new1", "new2", "old"}[i])
		r, f, nw := startMixed(t, string(id), m, "g")
		rafts, fsms, nets = append(rafts, r), append(fsms, f), append(nets, nw)
		servers = append(servers, raft.Server{ID: id, Address: raft.ServerAddress(m.ln.Addr().String())})
	}
	if err := rafts[0].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	// Every node leads in turn, so each dials the others.
	for round, want := range []int{0, 2, 1, 0} {
		var leader int
		eventually(t, 10*time.Second, "a leader", func() error {
			for i, r := range rafts {
				if r.State() == raft.Leader {
					leader = i
					return nil
				}
			}
			return fmt.Errorf("none")
		})
		if leader != want {
			if err := rafts[leader].LeadershipTransferToServer(servers[want].ID, servers[want].Address).Error(); err != nil {
				t.Fatalf("round %d: transfer to %s: %v", round, servers[want].ID, err)
			}
			eventually(t, 10*time.Second, "the transfer", func() error {
				if rafts[want].State() != raft.Leader {
					return fmt.Errorf("%s is %s", servers[want].ID, rafts[want].State())
				}
				return nil
			})
		}
		cmd := fmt.Sprintf("from-%s", servers[want].ID)
		if err := rafts[want].Apply([]byte(cmd), 5*time.Second).Error(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, f := range fsms {
			eventually(t, 5*time.Second, fmt.Sprintf("%s applies %s", servers[i].ID, cmd), func() error {
				if got := f.applied(); len(got) == 0 || got[len(got)-1] != cmd {
					return fmt.Errorf("applied %v", got)
				}
				return nil
			})
		}
	}
	// The new nodes talk raftnet to each other, and know the old one
	// does not speak it.
	for i, nw := range nets[:2] {
		nw.mu.Lock()
		_, linked := nw.links[servers[1-i].Address]
		_, old := nw.legacy[servers[2].Address]
		nw.mu.Unlock()
		if !linked || !old {
			t.Errorf("%s: link to the other new node %v, old node known as such %v", servers[i].ID, linked, old)
		}
	}
}

// With real raft: entries that do not fit one frame together reach the
// follower, in frames raft's replication advances through (the trimmed
// request is what raft reads back; TestLargeEntriesAreSentInFrames).
func TestRaftReplicatesEntriesLargerThanAFrameTogether(t *testing.T) {
	lowerMaxFrame(t, 1<<20)
	var nodes []*node
	var servers []raft.Server
	for _, id := range []string{"n1", "n2"} {
		n := newNode(t, id)
		t.Cleanup(n.stop)
		// Applies queue up and leave in one batch: one request of all.
		n.start(t, "g", func(rc *raft.Config) { rc.BatchApplyCh = true })
		nodes = append(nodes, n)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: n.addr()})
	}
	if err := nodes[0].rafts["g"].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	l := leaderOf(t, nodes, "g")
	var follower *node
	for _, n := range nodes {
		if n != l {
			follower = n
		}
	}
	data := string(make([]byte, 400<<10)) // two fit in a frame, three do not
	var cmds [][]byte
	for i := range 9 {
		cmds = append(cmds, []byte(fmt.Sprint(i, data)))
	}
	var fs []raft.ApplyFuture
	for _, c := range cmds {
		fs = append(fs, l.rafts["g"].Apply(c, 5*time.Second))
	}
	committed := make(chan error, 1)
	go func() {
		for _, f := range fs {
			if err := f.Error(); err != nil {
				committed <- err
				return
			}
		}
		committed <- nil
	}()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the entries are not committed after 10s: the follower never got them")
	}
	eventually(t, 5*time.Second, "the follower applies every entry", func() error {
		if got := len(follower.fsms["g"].applied()); got != 9 {
			return fmt.Errorf("applied %d of 9", got)
		}
		return nil
	})
}
