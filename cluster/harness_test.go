package cluster_test

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
)

// testNode is one in-process node with its gRPC server, like a process of
// the real daemon but sharing the test's address space.
type testNode struct {
	t     *testing.T
	id    string
	cfg   cluster.Config
	node  *cluster.Node
	gs    *grpc.Server
	peers *rpc.Peers
	conn  *grpc.ClientConn
}

// freePort returns a loopback address with a port free for both TCP and
// UDP (memberlist needs both).
func freePort(t *testing.T) string {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

// nodeConfig is a fast configuration for tests: few shards, quick timers.
func nodeConfig(t *testing.T, id string) cluster.Config {
	lvl := slog.LevelWarn
	if os.Getenv("FLOODGATE_TEST_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	var out io.Writer = io.Discard
	if testing.Verbose() || os.Getenv("FLOODGATE_TEST_DEBUG") != "" {
		out = os.Stderr
	}
	return cluster.Config{
		NodeID:     id,
		DataDir:    t.TempDir(),
		GRPCAddr:   freePort(t),
		RaftAddr:   freePort(t),
		GossipAddr: freePort(t),
		Shards:     8,
		Replicas:   3,
		Fsync:      true,
		DeadAfter:  3 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: lvl})).With("test", t.Name()),
	}
}

// start opens and starts a node with cfg, registering its cleanup.
func start(t *testing.T, cfg cluster.Config) *testNode {
	t.Helper()
	tn := &testNode{t: t, id: cfg.NodeID, cfg: cfg}
	tn.open()
	t.Cleanup(tn.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tn.node.Start(ctx); err != nil {
		t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	return tn
}

func (tn *testNode) open() {
	t := tn.t
	ln, err := net.Listen("tcp", tn.cfg.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	tn.peers = rpc.NewPeers()
	if tn.node, err = cluster.Open(tn.cfg, tn.peers); err != nil {
		ln.Close()
		t.Fatalf("open %s: %v", tn.id, err)
	}
	tn.gs, _ = rpc.NewGRPCServer(tn.node, tn.peers, rpc.Config{})
	go tn.gs.Serve(ln)
	if tn.conn, err = grpc.NewClient(tn.cfg.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
}

// stop shuts the node down cleanly (idempotent).
func (tn *testNode) stop() {
	if tn.node == nil {
		return
	}
	tn.conn.Close()
	tn.gs.Stop()
	if err := tn.node.Close(); err != nil {
		tn.t.Logf("close %s: %v", tn.id, err)
	}
	tn.peers.Close()
	tn.node = nil
}

// restart stops the node and starts it again on the same data and ports.
func (tn *testNode) restart() {
	tn.t.Helper()
	restartAll(tn.t, tn)
}

// restartAll stops nodes and starts them again at once, as processes
// restarted together would: none of them has a quorum alone.
func restartAll(t *testing.T, nodes ...*testNode) {
	t.Helper()
	for _, tn := range nodes {
		tn.stop()
	}
	errs := make(chan error, len(nodes))
	for _, tn := range nodes {
		tn.cfg.Join = nil
		tn.open()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tn.node.Start(ctx); err != nil {
				errs <- fmt.Errorf("restart %s: %w", tn.id, err)
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

func (tn *testNode) limiter() pb.RateLimiterClient { return pb.NewRateLimiterClient(tn.conn) }
func (tn *testNode) admin() pb.AdminClient         { return pb.NewAdminClient(tn.conn) }

// eventually retries cond until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}

// settled reports nil once every shard has exactly its desired replicas,
// all voting, led by its preferred leader, as tn's status shows.
func settled(tn *testNode) error {
	st, err := tn.admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		return err
	}
	for _, s := range st.ShardStatus {
		if len(s.Desired) == 0 {
			return fmt.Errorf("shard %d has no placement", s.Id)
		}
		if s.Leader != s.Desired[0] {
			return fmt.Errorf("shard %d led by %q, preferred %q", s.Id, s.Leader, s.Desired[0])
		}
		if len(s.Replicas) != len(s.Desired) {
			return fmt.Errorf("shard %d has replicas %v, want %v", s.Id, s.Replicas, s.Desired)
		}
		for _, r := range s.Replicas {
			if r.Suffrage != "voter" {
				return fmt.Errorf("shard %d: %s is a %s", s.Id, r.NodeId, r.Suffrage)
			}
		}
	}
	return nil
}

// cluster3 starts a three-node cluster and waits until it has settled.
func cluster3(t *testing.T) []*testNode {
	t.Helper()
	n1 := start(t, nodeConfig(t, "n1"))
	nodes := []*testNode{n1}
	for _, id := range []string{"n2", "n3"} {
		cfg := nodeConfig(t, id)
		cfg.Join = []string{n1.cfg.GRPCAddr}
		nodes = append(nodes, start(t, cfg))
	}
	waitSettled(t, nodes, 30*time.Second)
	return nodes
}

// waitSettled waits until every node's status shows a settled cluster, and
// dumps every node's status when it does not.
func waitSettled(t *testing.T, nodes []*testNode, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, n := range nodes {
		for {
			err := settled(n)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				for _, m := range nodes {
					st, serr := m.admin().Status(context.Background(), &pb.StatusRequest{})
					t.Logf("status of %s (err %v):\n%s", m.id, serr, protojson.Format(st))
				}
				t.Fatalf("cluster did not settle within %s: %s: %v", timeout, n.id, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
