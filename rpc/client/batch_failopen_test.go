package client

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster/hashing"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// batchNode is a node's RateLimiter that fails every AllowBatch with err,
// or fails each item with item, or admits each check.
type batchNode struct {
	pb.UnimplementedRateLimiterServer
	err  error
	item *pb.ItemError
}

func (n *batchNode) AllowBatch(_ context.Context, req *pb.AllowBatchRequest) (*pb.AllowBatchResponse, error) {
	if n.err != nil {
		return nil, n.err
	}
	out := &pb.AllowBatchResponse{}
	for _, r := range req.Requests {
		if n.item != nil {
			out.Results = append(out.Results, &pb.AllowBatchItem{Error: n.item})
		} else {
			out.Results = append(out.Results, &pb.AllowBatchItem{Response: &pb.AllowResponse{Allowed: true, Limit: 5, Remaining: 4, Key: r.Key}})
		}
	}
	return out, nil
}

func serveBatchNode(t *testing.T, n pb.RateLimiterServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterRateLimiterServer(s, n)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// keyOfShard returns a key that hashes to shard of shards.
func keyOfShard(shard, shards int) string {
	for i := 0; ; i++ {
		if k := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)); hashing.ShardOf(k, shards) == shard {
			return k
		}
	}
}

// batchClient is a Client of the nodes at addrs, node i leading shard i,
// that records what OnError hears.
func batchClient(failOpen bool, addrs ...string) (*Client, *[]error) {
	var mu sync.Mutex
	heard := &[]error{}
	leaders := map[int]string{}
	for i, a := range addrs {
		leaders[i] = a
	}
	c := &Client{opts: Options{FailOpen: failOpen, CallTimeout: 2 * time.Second, OnError: func(err error) {
		mu.Lock()
		*heard = append(*heard, err)
		mu.Unlock()
	}}, conns: map[string]*grpc.ClientConn{}, shards: len(addrs), leaders: leaders, nodes: addrs}
	return c, heard
}

var batchLimit = &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 5, WindowMs: 1000}

// A node's failure is its checks' alone, classified on its own: under
// FailOpen a node that could not answer has its checks admitted, while
// another node's refusal (InvalidArgument) stays that node's checks'
// error, whichever answered first. Before, the first error decided for
// the whole batch: the refused checks were admitted too, and OnError
// heard only one failure.
func TestAllowBatchFailsOpenPerNode(t *testing.T) {
	down := serveBatchNode(t, &batchNode{err: status.Error(codes.Unavailable, "no leader")})
	refusing := serveBatchNode(t, &batchNode{err: status.Error(codes.InvalidArgument, "requests[0].limit.limit: over --max-log-length")})
	c, heard := batchClient(true, down, refusing)
	defer c.closeConns()
	reqs := []*pb.AllowRequest{{Key: keyOfShard(0, 2), Limit: batchLimit}, {Key: keyOfShard(1, 2), Limit: batchLimit}}
	resp, err := c.AllowBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Results[0].GetResponse(); !r.GetAllowed() || r.GetRemaining() != -1 {
		t.Errorf("the unreachable node's check: %v, want admitted by FailOpen", resp.Results[0])
	}
	if e := resp.Results[1].GetError(); e == nil || codes.Code(e.Code) != codes.InvalidArgument {
		t.Errorf("the refused check: %v, want its InvalidArgument", resp.Results[1])
	}
	if len(*heard) != 2 {
		t.Errorf("OnError heard %v, want both failures", *heard)
	}
}

// Without FailOpen, a node's failure does not throw away what the other
// nodes answered (and counted): its checks carry the error.
func TestAllowBatchKeepsTheOtherNodesAnswers(t *testing.T) {
	up := serveBatchNode(t, &batchNode{})
	down := serveBatchNode(t, &batchNode{err: status.Error(codes.Unavailable, "no leader")})
	c, _ := batchClient(false, up, down)
	defer c.closeConns()
	reqs := []*pb.AllowRequest{{Key: keyOfShard(0, 2), Limit: batchLimit}, {Key: keyOfShard(1, 2), Limit: batchLimit}}
	resp, err := c.AllowBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Results[0].GetResponse(); !r.GetAllowed() || r.GetRemaining() != 4 {
		t.Errorf("the answered check: %v", resp.Results[0])
	}
	if e := resp.Results[1].GetError(); e == nil || codes.Code(e.Code) != codes.Unavailable {
		t.Errorf("the unanswered check: %v, want Unavailable", resp.Results[1])
	}
	// A batch all of one node fails as that node's call did.
	if _, err := c.AllowBatch(context.Background(), reqs[1:]); status.Code(err) != codes.Unavailable {
		t.Errorf("a batch of the failing node alone: %v", err)
	}
	// So does a batch whose every node failed, with the first request's
	// node's error.
	refusing := serveBatchNode(t, &batchNode{err: status.Error(codes.PermissionDenied, "no")})
	all, heard := batchClient(false, refusing, down)
	defer all.closeConns()
	if _, err := all.AllowBatch(context.Background(), reqs); status.Code(err) != codes.PermissionDenied || len(*heard) != 2 {
		t.Errorf("every node failed: %v, want the first request's node's error; OnError heard %v", err, *heard)
	}
}

// An item the cluster could not answer is admitted under FailOpen, as the
// same check is through Allow; an item it refused is not.
func TestAllowBatchFailsOpenPerItem(t *testing.T) {
	for _, tc := range []struct {
		code codes.Code
		open bool
	}{{codes.Unavailable, true}, {codes.DeadlineExceeded, true}, {codes.InvalidArgument, false}, {codes.OK, false}} {
		n := serveBatchNode(t, &batchNode{item: &pb.ItemError{Code: uint32(tc.code), Message: "why"}})
		c, heard := batchClient(true, n)
		resp, err := c.AllowBatch(context.Background(), []*pb.AllowRequest{{Key: "x", Limit: batchLimit}})
		c.closeConns()
		if err != nil {
			t.Fatalf("%s: %v", tc.code, err)
		}
		it := resp.Results[0]
		if open := it.GetResponse().GetAllowed() && it.GetResponse().GetRemaining() == -1; open != tc.open {
			t.Errorf("item error %s: %v, want admitted %v", tc.code, it, tc.open)
		}
		if !tc.open && it.GetError() == nil {
			t.Errorf("item error %s: the error is gone: %v", tc.code, it)
		}
		if len(*heard) != 1 {
			t.Errorf("item error %s: OnError heard %v", tc.code, *heard)
		}
	}
}
