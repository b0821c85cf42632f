package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
	"github.com/floodgate/floodgate/test/inproc"
)

func TestClientCountsExactlyAndKeepsBatchOrder(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	ctx := context.Background()
	// One seed is enough: the client learns the other nodes and the leaders.
	c, err := client.New(ctx, client.Options{Addrs: []string{nodes[2].Cfg.GRPCAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 4, WindowMs: 60_000}
	for k := 0; k < 20; k++ {
		key := fmt.Sprintf("user:%d", k)
		for i := 0; i < 6; i++ {
			resp, err := c.Allow(ctx, &pb.AllowRequest{Key: key, Limit: lim})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed != (i < 4) {
				t.Fatalf("%s request %d: allowed=%v", key, i, resp.Allowed)
			}
		}
	}
	// A batch spanning every shard comes back in request order.
	var reqs []*pb.AllowRequest
	for k := 0; k < 50; k++ {
		cost := int64(k % 5)
		reqs = append(reqs, &pb.AllowRequest{Key: fmt.Sprintf("batch:%d", k), Limit: lim, Cost: &cost})
	}
	resp, err := c.AllowBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for k, item := range resp.Results {
		if item.Error != nil || !item.Response.Allowed || item.Response.Remaining != 4-int64(k%5) {
			t.Fatalf("item %d: %v", k, item)
		}
	}
}

func TestClientFailsOpenOrClosed(t *testing.T) {
	nodes := inproc.Cluster(t, 1)
	ctx := context.Background()
	var reported atomic.Int64
	open, err := client.New(ctx, client.Options{
		Addrs: []string{nodes[0].Cfg.GRPCAddr}, FailOpen: true,
		OnError: func(error) { reported.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	closed, err := client.New(ctx, client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer closed.Close()
	lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 1, WindowMs: 60_000}
	if _, err := open.Allow(ctx, &pb.AllowRequest{Key: "k", Limit: lim}); err != nil {
		t.Fatal(err)
	}
	nodes[0].Stop()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := open.Allow(cctx, &pb.AllowRequest{Key: "k", Limit: lim})
	if err != nil || !resp.Allowed || resp.Remaining != -1 || reported.Load() != 1 {
		t.Fatalf("fail-open: %v %v, %d errors reported", resp, err, reported.Load())
	}
	if _, err := closed.Allow(cctx, &pb.AllowRequest{Key: "k", Limit: lim}); status.Code(err) != codes.Unavailable {
		t.Fatalf("fail-closed: %v, want Unavailable", err)
	}
	// Invalid requests fail either way.
	if _, err := open.Allow(cctx, &pb.AllowRequest{Key: "", Limit: lim}); err == nil {
		t.Fatal("fail-open admitted an invalid request")
	}
}

// The client learns policies, so it builds descriptor keys in the policy's
// key_by order, exactly as the servers do, and counts them exactly.
func TestClientPolicyKeys(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	ctx := context.Background()
	_, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{{
		Name: "by-user-ip", KeyBy: []string{"user", "ip"},
		Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 2, WindowMs: 60_000}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Addrs: []string{nodes[1].Cfg.GRPCAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	desc := map[string]string{"ip": "10.1.2.3", "user": "ann"}
	for i := 0; i < 3; i++ {
		resp, err := c.Allow(ctx, &pb.AllowRequest{Policy: "by-user-ip", Descriptors: desc})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Key != "user=ann,ip=10.1.2.3" || resp.Allowed != (i < 2) {
			t.Fatalf("request %d: %v", i, resp)
		}
	}
	// Known policy rules apply before any round trip.
	if _, err := c.Allow(ctx, &pb.AllowRequest{Policy: "by-user-ip", Descriptors: map[string]string{"user": "ann"}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("missing descriptor: %v", err)
	}
}

// Closing a client twice is harmless (a deferred Close after an explicit
// one used to panic on a closed channel).
func TestCloseTwice(t *testing.T) {
	nodes := inproc.Cluster(t, 1)
	c, err := client.New(context.Background(), client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
