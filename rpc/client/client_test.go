package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
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
		// A sliding log: a fixed window ends at the next epoch-aligned
		// minute, and one passing between the checks admitted the third.
		Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 2, WindowMs: 60_000}}},
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

// Many callers checking at once through one client share calls (the
// default) or each make their own (NoCoalescing); either way each gets
// its own answer and the cluster admits exactly the limit of every key,
// and a check the node refuses fails alone, naming its field.
func TestConcurrentCallersCountExactly(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	ctx := context.Background()
	for _, alone := range []bool{false, true} {
		var batches, singles, shared atomic.Int64
		count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			switch method {
			case pb.RateLimiter_AllowBatch_FullMethodName:
				batches.Add(1)
				for _, r := range req.(*pb.AllowBatchRequest).Requests {
					if r.Policy != "" {
						shared.Add(1)
					}
				}
			case pb.RateLimiter_Allow_FullMethodName:
				singles.Add(1)
			}
			return invoke(ctx, method, req, reply, cc, opts...)
		}
		c, err := client.New(ctx, client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}, NoCoalescing: alone,
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}})
		if err != nil {
			t.Fatal(err)
		}
		const callers, each, keys, limit = 64, 30, 8, 100
		lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: limit, WindowMs: 60_000}
		var allowed [keys]atomic.Int64
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				for j := range each {
					k := (i + j) % keys
					key := fmt.Sprintf("alone=%v:%d", alone, k)
					resp, err := c.Allow(ctx, &pb.AllowRequest{Key: key, Limit: lim})
					if err != nil {
						t.Error(err)
						return
					}
					if resp.Key != key {
						t.Errorf("asked for %s, answered for %s", key, resp.Key)
					}
					if resp.Allowed {
						allowed[k].Add(1)
					}
					if j == each/2 && i%8 == 0 { // a check the node refuses, among the others
						tooLong := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1 << 40, WindowMs: 1000}
						_, err := c.Allow(ctx, &pb.AllowRequest{Key: key, Limit: tooLong})
						if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "limit") {
							t.Errorf("a sliding log over the nodes' cap: %v", err)
						}
						// A policy the client has not learned goes alone: the
						// node might refuse or delay the whole call for it.
						_, err = c.Allow(ctx, &pb.AllowRequest{Key: key, Policy: "no-such-policy"})
						if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "unknown policy") {
							t.Errorf("an unknown policy: %v", err)
						}
					}
				}
			})
		}
		wg.Wait()
		c.Close()
		for k := range keys {
			// 64×30 checks over 8 keys: 240 a key, of which exactly the limit pass.
			if got := allowed[k].Load(); got != limit {
				t.Errorf("NoCoalescing=%v: key %d admitted %d, want %d", alone, k, got, limit)
			}
		}
		if shared.Load() != 0 {
			t.Errorf("%d checks naming a policy the client does not know shared a call", shared.Load())
		}
		if alone && batches.Load() != 0 {
			t.Errorf("NoCoalescing made %d batch calls", batches.Load())
		}
		if !alone && batches.Load() == 0 {
			t.Errorf("64 callers at once shared no call (%d single calls)", singles.Load())
		}
		t.Logf("NoCoalescing=%v: %d single calls, %d batch calls for %d checks", alone, singles.Load(), batches.Load(), callers*each)
	}
}

// A client used after Close fails at once and dials nothing: calls still
// in flight, a coalesced batch among them, cannot leave a connection
// behind.
func TestClosedClientFails(t *testing.T) {
	nodes := inproc.Cluster(t, 1)
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodes[0].Cfg.GRPCAddr}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 5, WindowMs: 60_000}
	if _, err := c.Allow(ctx, &pb.AllowRequest{Key: "k", Limit: lim}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	start := time.Now()
	if _, err := c.Allow(ctx, &pb.AllowRequest{Key: "k", Limit: lim}); status.Code(err) != codes.Canceled {
		t.Errorf("after Close: %v, want Canceled", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("after Close a check took %v", took)
	}
}

// A fail-open client starts while no node answers (a service deployed
// during an outage), admits its checks unasked until a node is back, and
// from then on counts them; a fail-closed one refuses to start.
func TestFailOpenClientStartsWhileTheClusterIsDown(t *testing.T) {
	nodes := inproc.Cluster(t, 1)
	addr := nodes[0].Cfg.GRPCAddr
	nodes[0].Stop()
	ctx := context.Background()
	if c, err := client.New(ctx, client.Options{Addrs: []string{addr}}); !errors.Is(err, client.ErrNoNodes) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a fail-closed client with no node up: %v, want ErrNoNodes", err)
	}
	var heard atomic.Int64
	c, err := client.New(ctx, client.Options{Addrs: []string{addr}, FailOpen: true, RefreshInterval: 100 * time.Millisecond,
		OnError: func(error) { heard.Add(1) }})
	if err != nil {
		t.Fatalf("a fail-open client with no node up: %v", err)
	}
	defer c.Close()
	if heard.Load() != 1 {
		t.Fatalf("OnError heard %d errors from New, want 1", heard.Load())
	}
	lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 1, WindowMs: 3_600_000}
	for range 3 {
		resp, err := c.Allow(ctx, &pb.AllowRequest{Key: "k", Limit: lim})
		if err != nil || !resp.Allowed || resp.Remaining != -1 {
			t.Fatalf("a check with no node up: %v, %v; want admitted unasked", resp, err)
		}
	}
	nodes[0].Restart()
	inproc.Eventually(t, 30*time.Second, "the client's first answered check", func() error {
		resp, err := c.Allow(ctx, &pb.AllowRequest{Key: "k", Limit: lim})
		if err != nil {
			return err
		}
		if resp.Remaining == -1 {
			return errors.New("still admitted unasked")
		}
		if !resp.Allowed {
			return fmt.Errorf("denied (%v): the unasked checks were counted", resp)
		}
		return nil
	})
	if resp, err := c.Allow(ctx, &pb.AllowRequest{Key: "k", Limit: lim}); err != nil || resp.Allowed {
		t.Fatalf("the check after the limit's one: %v, %v; want denied", resp, err)
	}
}
