package inproc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/floodgate/floodgate/cluster"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc"
	"github.com/floodgate/floodgate/test/e2e"
	"github.com/floodgate/floodgate/test/freeport"
)

// Node is one in-process node with its gRPC server.
type Node struct {
	ID   string
	Cfg  cluster.Config
	RPC  rpc.Config
	Node *cluster.Node

	t     testing.TB
	gs    *grpc.Server
	peers *rpc.Peers
	conn  *grpc.ClientConn
}

// FreeAddr returns a loopback address whose port is free for TCP and UDP
// (memberlist needs both).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Config is a configuration for tests: 8 shards, quick membership timers,
// relaxed Raft timers, fsync on. FLOODGATE_TEST_DEBUG=1 prints the nodes' logs.
func Config(t testing.TB, id string) cluster.Config {
	lvl := slog.LevelWarn
	var out io.Writer = io.Discard
	if os.Getenv("FLOODGATE_TEST_DEBUG") != "" {
		lvl, out = slog.LevelDebug, os.Stderr
	}
	return cluster.Config{
		NodeID:     id,
		DataDir:    t.TempDir(),
		GRPCAddr:   FreeAddr(t),
		RaftAddr:   FreeAddr(t),
		GossipAddr: FreeAddr(t),
		Shards:     8,
		Replicas:   3,
		Fsync:      cluster.FsyncBatch,
		DeadAfter:  3 * time.Second,
		// Twice the daemon's defaults: these nodes share one process,
		// often under the race detector beside other test packages, and a
		// spurious election there is noise, not what a test checks.
		// Failover at the defaults is tested on real processes
		// (test/e2e, test/fault).
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		Logger:             slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: lvl})).With("test", t.Name()),
	}
}

// Start opens and starts a node with cfg; it is stopped when t ends.
func Start(t testing.TB, cfg cluster.Config) *Node {
	t.Helper()
	n, err := TryStart(t, cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	return n
}

// Open opens a node with cfg without starting it (Node.Node.Start starts
// it); it is stopped when t ends.
func Open(t testing.TB, cfg cluster.Config) *Node {
	t.Helper()
	n := &Node{t: t, ID: cfg.NodeID, Cfg: cfg}
	n.open()
	t.Cleanup(n.Stop)
	return n
}

// TryStart is Start for a node the cluster may refuse: Start's error,
// with the node stopped.
func TryStart(t testing.TB, cfg cluster.Config) (*Node, error) {
	t.Helper()
	n := &Node{t: t, ID: cfg.NodeID, Cfg: cfg}
	n.open()
	t.Cleanup(n.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Node.Start(ctx); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) open() {
	t := n.t
	ln, err := net.Listen("tcp", n.Cfg.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	n.peers = rpc.NewPeers()
	if n.Node, err = cluster.Open(n.Cfg, n.peers); err != nil {
		ln.Close()
		t.Fatalf("open %s: %v", n.ID, err)
	}
	n.gs, _, _ = rpc.NewGRPCServer(n.Node, n.peers, n.RPC)
	go n.gs.Serve(ln)
	if n.conn, err = grpc.NewClient(n.Cfg.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
}

// Stop shuts the node down cleanly; stopping twice is harmless.
func (n *Node) Stop() {
	if n.Node == nil {
		return
	}
	n.conn.Close()
	n.gs.Stop()
	if err := n.Node.Close(); err != nil {
		n.t.Logf("close %s: %v", n.ID, err)
	}
	n.peers.Close()
	n.Node = nil
}

// Restart stops the node and starts it again on the same data and ports.
func (n *Node) Restart() {
	n.t.Helper()
	RestartAll(n.t, n)
}

// RestartAll stops nodes and starts them again at once, as processes
// restarted together would: none of them has a quorum alone.
func RestartAll(t testing.TB, nodes ...*Node) {
	t.Helper()
	for _, n := range nodes {
		n.Stop()
	}
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		n.Cfg.Join = nil
		n.open()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := n.Node.Start(ctx); err != nil {
				errs <- fmt.Errorf("restart %s: %w", n.ID, err)
				return
			}
			errs <- nil
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Conn is a gRPC connection to the node.
func (n *Node) Conn() *grpc.ClientConn { return n.conn }

// Limiter is the node's RateLimiter client.
func (n *Node) Limiter() pb.RateLimiterClient { return pb.NewRateLimiterClient(n.conn) }

// Admin is the node's Admin client.
func (n *Node) Admin() pb.AdminClient { return pb.NewAdminClient(n.conn) }

// Eventually retries cond until it returns nil, failing t after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Settled reports nil once n's status shows a settled cluster, by the
// same rule as real processes (e2e.Settled).
func Settled(n *Node) error {
	st, err := n.Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		return err
	}
	return e2e.Settled(st)
}

// WaitSettled waits until every node's status is Settled, and dumps every
// node's status when it is not within timeout.
func WaitSettled(t testing.TB, nodes []*Node, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, n := range nodes {
		for {
			err := Settled(n)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				for _, m := range nodes {
					st, serr := m.Admin().Status(context.Background(), &pb.StatusRequest{})
					t.Logf("status of %s (err %v):\n%s", m.ID, serr, protojson.Format(st))
				}
				t.Fatalf("cluster did not settle within %s: %s: %v", timeout, n.ID, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Cluster starts a cluster of size nodes (n1 creates it, the others join)
// and waits until it has settled. It is a legacy cluster of 8 shards.
func Cluster(t testing.TB, size int) []*Node {
	t.Helper()
	return ClusterOf(t, size, func(*cluster.Config) {})
}

// SlotCluster starts a cluster of slots: slots slots, one group per node.
func SlotCluster(t testing.TB, size, slots int) []*Node {
	t.Helper()
	return ClusterOf(t, size, func(c *cluster.Config) { c.Shards, c.Slots = 0, slots })
}

// ClusterOf starts a cluster of size nodes whose configurations edit
// adjusts, and waits until it has settled.
func ClusterOf(t testing.TB, size int, edit func(*cluster.Config)) []*Node {
	t.Helper()
	cfg := Config(t, "n1")
	edit(&cfg)
	first := Start(t, cfg)
	nodes := []*Node{first}
	for i := 2; i <= size; i++ {
		cfg := Config(t, fmt.Sprintf("n%d", i))
		edit(&cfg)
		cfg.Join = []string{first.Cfg.GRPCAddr}
		nodes = append(nodes, Start(t, cfg))
	}
	WaitSettled(t, nodes, 30*time.Second)
	return nodes
}
