package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/dnstest"
)

// pod is one StatefulSet pod on loopback: its own IP, the ports every pod
// uses, its name as node id.
func pod(t *testing.T, c *Cluster, name, ip string, ports [4]string) *Node {
	t.Helper()
	n, err := c.NewNode(name)
	if err != nil {
		t.Fatal(err)
	}
	movePod(t, n, ip, ports)
	return n
}

// movePod gives a (stopped) pod a new IP, as a rescheduled pod gets.
func movePod(t *testing.T, n *Node, ip string, ports [4]string) {
	t.Helper()
	n.GRPC, n.HTTP = net.JoinHostPort(ip, ports[0]), net.JoinHostPort(ip, ports[1])
	n.Raft, n.Gossip = net.JoinHostPort(ip, ports[2]), net.JoinHostPort(ip, ports[3])
	if err := n.Redial(grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
}

// TestStatefulSetStart simulates a Kubernetes StatefulSet on loopback:
// three pods start at once with the same arguments (only the pod IP
// differs, as $(POD_IP) does), find each other through a headless
// service's DNS name and form one cluster, which exactly one of them
// created. Then a pod is rescheduled with a new IP and the same volume: it
// keeps its identity and data, the others reach it at its new address,

// podNetwork plays a StatefulSet's network on loopback: a DNS server for
// the headless service's names, the four ports every pod listens on, and
// pod IPs in a random 127.x.y.0/24 (concurrent tests do not meet).
func podNetwork(t *testing.T) (dns *dnstest.Server, ports [4]string, ip func(int) string) {
	t.Helper()
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	for i := range ports {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, ports[i], _ = net.SplitHostPort(addr)
	}
	subnet := fmt.Sprintf("127.%d.%d.", 10+rand.IntN(200), rand.IntN(250))
	return dns, ports, func(i int) string { return fmt.Sprintf("%s%d", subnet, i+1) }
}

// and the cluster keeps its quorum when another pod goes.
func TestStatefulSetStart(t *testing.T) {
	t.Parallel()
	dns, ports, ip := podNetwork(t)
	c := &Cluster{Bin: bin, Dir: t.TempDir(), Args: []string{
		"--join", "dns:floodgate-headless:" + ports[0], "--bootstrap-expect", "3", "--dns-server", dns.Addr,
	}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs(30))
		}
		c.Close()
	})
	var ips []string
	for i := range 3 {
		pod(t, c, fmt.Sprintf("floodgate-%d", i), ip(i), ports)
		ips = append(ips, ip(i))
	}
	dns.Set("floodgate-headless", ips...) // publishNotReadyAddresses: pods are listed before they serve
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if err := n.WaitServing(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, n := range c.Nodes {
		st, err := n.Admin().Status(ctx, &pb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids[st.ClusterId] = true
		if len(st.Nodes) != 3 {
			t.Fatalf("%s sees %d nodes", n.ID, len(st.Nodes))
		}
	}
	if len(ids) != 1 {
		t.Fatalf("the pods formed %d clusters: %v", len(ids), ids)
	}
	created := 0
	for _, n := range c.Nodes {
		if strings.Contains(n.Log(), "created cluster") {
			created++
			if n.ID != "floodgate-0" {
				t.Errorf("%s created the cluster, not the smallest id", n.ID)
			}
		}
	}
	if created != 1 {
		t.Fatalf("%d pods created a cluster, want 1", created)
	}

	// Counts to keep across the move.
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: time.Hour.Milliseconds()}
	for range 4 {
		if resp, err := c.Nodes[1].Limiter().Allow(ctx, &pb.AllowRequest{Key: "sts-key", Limit: lim}); err != nil || !resp.Allowed {
			t.Fatalf("check: %v, %v", resp, err)
		}
	}

	// floodgate-2 is rescheduled: same volume, same name, a new IP.
	moved := c.Nodes[2]
	moved.Stop()
	movePod(t, moved, ip(3), ports)
	dns.Set("floodgate-headless", ip(0), ip(1), ip(3))
	if err := moved.Start(); err != nil {
		t.Fatal(err)
	}
	if err := moved.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(moved.Log(), "resuming cluster membership") {
		t.Fatal("the rescheduled pod did not resume from its data")
	}
	waitFor(t, ctx, "the others to see floodgate-2 at its new address", func() error {
		st, err := c.Nodes[0].Admin().Status(ctx, &pb.StatusRequest{})
		if err != nil {
			return err
		}
		for _, m := range st.Nodes {
			if m.Id == moved.ID && (m.GrpcAddr != moved.GRPC || m.RaftAddr != moved.Raft || m.Health != "alive") {
				return fmt.Errorf("%s: grpc %s raft %s %s", m.Id, m.GrpcAddr, m.RaftAddr, m.Health)
			}
		}
		return Settled(st)
	})

	// floodgate-0 goes: floodgate-1 and the moved pod must make a quorum,
	// which needs Raft to reach the moved pod at its new IP.
	c.Nodes[0].Kill()
	waitFor(t, ctx, "strict checks on the two remaining pods", func() error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := moved.Limiter().Allow(cctx, &pb.AllowRequest{Key: "sts-key", Limit: lim, Cost: proto.Int64(0)})
		if err != nil {
			return err
		}
		if resp.Remaining != 6 {
			t.Fatalf("after the move and a node's loss, sts-key has %d left, want 6: counts were lost", resp.Remaining)
		}
		return nil
	})
}

// waitFor polls fn until it returns nil or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, fn func() error) {
	t.Helper()
	var err error
	for {
		if err = fn(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
