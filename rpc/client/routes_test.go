package client

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// statusNode is a node's Admin that answers Status with a cluster of one
// shard led by the first of nodes; with hang set, after answers answers
// it answers no more (a node paused or cut off: the call lasts until the
// caller gives up).
type statusNode struct {
	pb.UnimplementedAdminServer
	nodes   []string
	hang    bool
	answers int64
	calls   atomic.Int64
	hung    chan struct{} // closed when the first call hangs
	delay   time.Duration // before each answer
}

func (n *statusNode) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	if c := n.calls.Add(1); c > n.answers && n.hang {
		if c == n.answers+1 {
			close(n.hung)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	select {
	case <-time.After(n.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	st := &pb.StatusResponse{Shards: 1, ShardStatus: []*pb.ShardStatus{{Id: 0, Leader: "n0"}}}
	for i, a := range n.nodes {
		st.Nodes = append(st.Nodes, &pb.NodeStatus{Id: "n" + string(rune('0'+i)), GrpcAddr: a})
	}
	return st, nil
}

// serveAdmin serves n on a new loopback port.
func serveAdmin(t *testing.T, n *statusNode) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterAdminServer(s, n)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// Close does not wait for a refresh of the routes stuck on a node that no
// longer answers: it ends it. Before, Close blocked until the refresh's
// own 5 s timeout.
func TestCloseEndsAStuckRefresh(t *testing.T) {
	n := &statusNode{hang: true, answers: 1, hung: make(chan struct{})}
	addr := serveAdmin(t, n)
	n.nodes = []string{addr}
	c, err := New(context.Background(), Options{Addrs: []string{addr}, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c.kick()
	<-n.hung
	start := time.Now()
	c.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v with a refresh in flight", took)
	}
}

// When every node the client learned is gone (the cluster restarted at
// new addresses), a refresh asks the addresses it was given again. Before,
// the learned list replaced them for good, and the client could never
// reach the cluster again.
func TestRefreshFallsBackToTheSeeds(t *testing.T) {
	seed := &statusNode{}
	addr := serveAdmin(t, seed)
	gone := deadAddr(t)
	seed.nodes = []string{gone} // the only member, at an address about to die
	c, err := New(context.Background(), Options{Addrs: []string{addr}, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seed.nodes = []string{addr} // the member is back, at the seed's address
	if err := c.loadRoutes(context.Background()); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if got := c.anyAddr(); got != addr {
		t.Errorf("routes to %s, want the member at %s", got, addr)
	}
}

// A node that takes the status call but does not answer (paused) does
// not hold up a refresh: the next node is asked half a second on. Before,
// the first node listed spent the refresh's whole time (New's context, or
// the refresher's 5 s) every time, so while it was paused the routes were
// never refreshed, and every check of the groups it had led went on
// timing out after their failover.
func TestRefreshSkipsANodeThatDoesNotAnswer(t *testing.T) {
	paused := &statusNode{hang: true, hung: make(chan struct{})}
	up := &statusNode{}
	pausedAddr, upAddr := serveAdmin(t, paused), serveAdmin(t, up)
	paused.nodes, up.nodes = []string{pausedAddr, upAddr}, []string{upAddr, pausedAddr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := New(ctx, Options{Addrs: []string{pausedAddr, upAddr}, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.route(keyOfShard(0, 1)); got != upAddr {
		t.Errorf("routes to %s, want the leader %s", got, upAddr)
	}
}

// The connection (and coalescing lane) of an address the cluster no
// longer lists (a node that left, or restarted at another address) is
// closed once no call routed to it before can still be in flight (a
// CallTimeout on), while the given addresses' are kept. Before, every
// such address kept its connection, dialling it, for the client's life.
func TestConnectionsOfDepartedNodesAreClosed(t *testing.T) {
	seed := &statusNode{}
	addr := serveAdmin(t, seed)
	seed.nodes = []string{addr}
	c, err := New(context.Background(), Options{Addrs: []string{addr}, RefreshInterval: time.Hour, CallTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old := deadAddr(t) // where a node served before it moved
	cc := c.conn(old)
	c.co.lanes[old] = &lane{addr: old}
	for range 2 { // the first refresh finds it unlisted, the next one a CallTimeout on
		if err := c.loadRoutes(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.RLock()
	_, kept := c.conns[old]
	_, seedKept := c.conns[addr]
	c.mu.RUnlock()
	if kept || cc.GetState() != connectivity.Shutdown {
		t.Errorf("the departed node's connection is kept (%v) or open (%v)", kept, cc.GetState())
	}
	if !seedKept {
		t.Error("the seed's connection was dropped")
	}
	if _, ok := c.co.lanes[old]; ok {
		t.Error("the departed node's lane is kept")
	}
}

// A node that is slow to answer, but answers, is still heard: the nodes
// asked after it do not cut it off.
func TestRefreshWaitsForASlowNode(t *testing.T) {
	slow := &statusNode{delay: 1500 * time.Millisecond}
	addr := serveAdmin(t, slow)
	slow.nodes = []string{addr}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := New(ctx, Options{Addrs: []string{addr, deadAddr(t)}, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
