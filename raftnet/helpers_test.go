package raftnet

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// tcpLayer is a raft.StreamLayer on a loopback listener: what the node's
// mux gives raftnet, without the mux.
type tcpLayer struct{ net.Listener }

func (l tcpLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

func newTCPLayer(t testing.TB) tcpLayer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return tcpLayer{ln}
}

// kv is a tiny FSM: it records every command it applied.
type kv struct {
	mu  sync.Mutex
	log []string
}

func (k *kv) Apply(l *raft.Log) any {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log = append(k.log, string(l.Data))
	return len(k.log)
}

func (k *kv) applied() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.log...)
}

func (k *kv) Snapshot() (raft.FSMSnapshot, error) {
	return &kvSnap{append([]string(nil), k.applied()...)}, nil
}

func (k *kv) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log = nil
	for len(b) > 0 {
		n := int(b[0])
		k.log = append(k.log, string(b[1:1+n]))
		b = b[1+n:]
	}
	return nil
}

type kvSnap struct{ log []string }

func (s *kvSnap) Persist(sink raft.SnapshotSink) error {
	for _, e := range s.log {
		if _, err := sink.Write(append([]byte{byte(len(e))}, e...)); err != nil {
			sink.Cancel()
			return err
		}
	}
	return sink.Close()
}
func (s *kvSnap) Release() {}

// node is a test node: a Network and the Raft instances of its groups.
type node struct {
	id     string
	net    *Network
	layer  tcpLayer
	rafts  map[string]*raft.Raft
	fsms   map[string]*kv
	stores map[string]*raft.InmemStore
	snaps  map[string]*raft.InmemSnapshotStore
}

func quietLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
}

func newNode(t testing.TB, id string) *node {
	t.Helper()
	l := newTCPLayer(t)
	n := &node{id: id, layer: l, rafts: map[string]*raft.Raft{}, fsms: map[string]*kv{},
		stores: map[string]*raft.InmemStore{}, snaps: map[string]*raft.InmemSnapshotStore{}}
	n.net = New(Config{Layer: l, Timeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	return n
}

func (n *node) addr() raft.ServerAddress { return raft.ServerAddress(n.layer.Addr().String()) }

// steadyTimings sets the raft timeouts of a group that runs on real time:
// long enough that a test binary stalled by the race detector on two busy
// cores keeps its leaders (at 100 ms a leader lost its lease under load
// and an Apply failed), short enough that elections take a second or two.
func steadyTimings(rc *raft.Config) {
	rc.HeartbeatTimeout, rc.ElectionTimeout = time.Second, time.Second
	rc.LeaderLeaseTimeout = 500 * time.Millisecond
}

// start opens group on n with a fresh store.
func (n *node) start(t testing.TB, group string, tune func(*raft.Config)) {
	t.Helper()
	tr, err := n.net.Transport(group, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.id)
	rc.Logger = quietLogger()
	steadyTimings(rc)
	if tune != nil {
		tune(rc)
	}
	f, store, snaps := &kv{}, raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	r, err := raft.NewRaft(rc, f, store, store, snaps, tr)
	if err != nil {
		t.Fatal(err)
	}
	n.rafts[group], n.fsms[group], n.stores[group], n.snaps[group] = r, f, store, snaps
}

func (n *node) stop() {
	for _, r := range n.rafts {
		r.Shutdown().Error()
	}
	n.net.Close()
}

// cluster starts size nodes running groups, bootstrapped together.
func cluster(t testing.TB, size int, groups ...string) []*node {
	t.Helper()
	var nodes []*node
	var servers []raft.Server
	for i := range size {
		n := newNode(t, fmt.Sprintf("n%d", i+1))
		nodes = append(nodes, n)
		servers = append(servers, raft.Server{ID: raft.ServerID(n.id), Address: n.addr()})
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	for _, g := range groups {
		for _, n := range nodes {
			n.start(t, g, nil)
		}
		if err := nodes[0].rafts[g].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// leaderOf waits for group's leader among nodes.
func leaderOf(t testing.TB, nodes []*node, group string) *node {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if r := n.rafts[group]; r != nil && r.State() == raft.Leader {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no leader of %s within 10s", group)
	return nil
}

// eventually retries cond until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// startMixed opens group on a node of a mixed cluster: with raftnet (and
// NetworkTransport as its fallback) or, for an older release, with
// NetworkTransport alone.
func startMixed(t testing.TB, id string, m *testMux, group string) (*raft.Raft, *kv, *Network) {
	t.Helper()
	legacy := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: m.layers[muxLegacy], MaxPool: 2, Timeout: 2 * time.Second, Logger: quietLogger()})
	var tr raft.Transport = legacy
	var nw *Network
	if l := m.layers[muxRaftnet]; l != nil {
		nw = New(Config{Layer: l, Timeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		rt, err := nw.Transport(group, legacy, nil)
		if err != nil {
			t.Fatal(err)
		}
		tr = rt
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.Logger = quietLogger()
	steadyTimings(rc)
	f, store := &kv{}, raft.NewInmemStore()
	r, err := raft.NewRaft(rc, f, store, store, raft.NewInmemSnapshotStore(), tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Shutdown().Error()
		if nw != nil {
			nw.Close()
		}
	})
	return r, f, nw
}
