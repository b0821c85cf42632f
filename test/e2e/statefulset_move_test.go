package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// TestStatefulSetMoveAll plays the shipped StatefulSet's addressing:
// every pod advertises its stable DNS name for gRPC and Raft and its IP
// for gossip. Then every pod restarts at once with a new IP and its
// volume (a node-pool upgrade, kubectl delete pod -l ...): the names
// follow the pods, so the cluster comes back with its counts. With pod
// IPs advertised, no Raft server could reach another at the addresses
// the meta state lists, and no group, meta included, could elect.
func TestStatefulSetMoveAll(t *testing.T) {
	t.Parallel()
	dns, ports, ip := podNetwork(t)
	name := func(i int) string { return fmt.Sprintf("floodgate-%d.floodgate-headless.e2e.test", i) }
	c := &Cluster{Bin: bin, Dir: t.TempDir(), Args: []string{
		"--join", "dns:floodgate-headless.e2e.test:" + ports[0], "--bootstrap-expect", "3", "--dns-server", dns.Addr,
	}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs(30))
		}
		c.Close()
	})
	// place puts every pod at the IPs first+i, as the kubelet and the
	// cluster's DNS would: pod i's name and the headless name resolve there.
	place := func(first int) {
		var ips []string
		for i, n := range c.Nodes {
			movePod(t, n, ip(first+i), ports)
			n.Args = append(n.Args[:len(c.Args)], "--advertise-host", name(i), "--advertise-gossip-host", ip(first+i))
			dns.Set(name(i), ip(first+i))
			ips = append(ips, ip(first+i))
		}
		dns.Set("floodgate-headless.e2e.test", ips...)
	}
	for i := range 3 {
		if _, err := c.NewNode(fmt.Sprintf("floodgate-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	place(0)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	startAll := func() {
		t.Helper()
		for _, n := range c.Nodes {
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range c.Nodes {
			if err := n.WaitServing(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	startAll()
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := c.Nodes[0].Admin().Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Nodes {
		if !strings.HasSuffix(m.GrpcAddr, ".e2e.test:"+ports[0]) || !strings.HasSuffix(m.RaftAddr, ".e2e.test:"+ports[2]) {
			t.Fatalf("%s advertises grpc %s raft %s, want its name", m.Id, m.GrpcAddr, m.RaftAddr)
		}
	}
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: time.Hour.Milliseconds()}
	keys := []string{"move-a", "move-b", "move-c", "move-d", "move-e", "move-f"}
	for _, k := range keys {
		for range 3 {
			if resp, err := c.Nodes[1].Limiter().Allow(ctx, &pb.AllowRequest{Key: k, Limit: lim}); err != nil || !resp.Allowed {
				t.Fatalf("check %s: %v, %v", k, resp, err)
			}
		}
	}

	// Every pod goes (SIGTERM, as kubectl delete does) and comes back at
	// a new IP with its volume.
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
	place(10)
	startAll()
	for _, k := range keys {
		waitFor(t, ctx, "a strict check of "+k+" after every pod moved", func() error {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			resp, err := c.Nodes[2].Limiter().Allow(cctx, &pb.AllowRequest{Key: k, Limit: lim, Cost: proto.Int64(0)})
			if err != nil {
				return err
			}
			if resp.Remaining != 7 {
				t.Fatalf("after every pod moved, %s has %d left, want 7: counts were lost", k, resp.Remaining)
			}
			return nil
		})
	}
	waitFor(t, ctx, "every pod alive at its new gossip address", func() error {
		st, err := c.Nodes[0].Admin().Status(ctx, &pb.StatusRequest{})
		if err != nil {
			return err
		}
		for _, m := range st.Nodes {
			var i int
			fmt.Sscanf(m.Id, "floodgate-%d", &i)
			if m.Health != "alive" || m.GossipAddr != net.JoinHostPort(ip(10+i), ports[3]) {
				return fmt.Errorf("%s: %s at gossip %s", m.Id, m.Health, m.GossipAddr)
			}
		}
		return Settled(st)
	})
}
