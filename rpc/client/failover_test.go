package client

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// countingNode is batchNode answering single checks too, counting the
// checks it was sent.
type countingNode struct {
	batchNode
	checks atomic.Int64
}

func (n *countingNode) Allow(_ context.Context, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	n.checks.Add(1)
	if n.err != nil {
		return nil, n.err
	}
	return &pb.AllowResponse{Allowed: true, Limit: 5, Remaining: 4, Key: req.Key}, nil
}

func (n *countingNode) AllowBatch(ctx context.Context, req *pb.AllowBatchRequest) (*pb.AllowBatchResponse, error) {
	n.checks.Add(int64(len(req.Requests)))
	return n.batchNode.AllowBatch(ctx, req)
}

// deadAddr is an address nothing listens on: connections are refused,
// as to a node killed a moment ago.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// A check routed to a node that is down (the routes still name it: it
// died since the last refresh) reached nothing, so it goes to another
// node, which answers it, single, coalesced or in a batch. Before, each
// such check failed with Unavailable (or was admitted unasked under
// FailOpen) while the rest of the cluster was up.
func TestCheckOnADeadNodeGoesToAnother(t *testing.T) {
	live := &countingNode{}
	liveAddr := serveBatchNode(t, live)
	dead := deadAddr(t)
	key := keyOfShard(0, 2)
	calls := map[string]func(c *Client) (*pb.AllowResponse, error){
		"Allow": func(c *Client) (*pb.AllowResponse, error) {
			return c.Allow(context.Background(), &pb.AllowRequest{Key: key, Limit: batchLimit})
		},
		"coalesced Allow": func(c *Client) (*pb.AllowResponse, error) {
			c.co = newCoalescer(c.allowOn, c.batchOn)
			return c.Allow(context.Background(), &pb.AllowRequest{Key: key, Limit: batchLimit})
		},
		"AllowBatch": func(c *Client) (*pb.AllowResponse, error) {
			resp, err := c.AllowBatch(context.Background(), []*pb.AllowRequest{{Key: key, Limit: batchLimit}})
			if err != nil {
				return nil, err
			}
			return itemOf(resp.Results[0])
		},
	}
	for name, call := range calls {
		// A new client each time: its connection to the dead node is
		// not known to be down yet, so the check is routed there.
		c, heard := batchClient(false, dead, liveAddr) // the dead node leads shard 0
		resp, err := call(c)
		if err != nil || !resp.Allowed || resp.Remaining != 4 {
			t.Errorf("%s routed to a dead node: %v, %v; want the live node's answer", name, resp, err)
		}
		if len(*heard) != 0 {
			t.Errorf("%s: OnError heard %v", name, *heard)
		}
		c.closeConns()
	}
	if got := live.checks.Load(); got != 3 {
		t.Errorf("the live node was sent %d checks, want 3", got)
	}
}

// A check that reached a node and failed there may have counted: it is
// not sent again.
func TestCheckThatReachedANodeIsNotSentAgain(t *testing.T) {
	failing := &countingNode{batchNode: batchNode{err: status.Error(codes.Unavailable, "shard-0: outcome unknown")}}
	other := &countingNode{}
	c, _ := batchClient(false, serveBatchNode(t, failing), serveBatchNode(t, other))
	defer c.closeConns()
	_, err := c.Allow(context.Background(), &pb.AllowRequest{Key: keyOfShard(0, 2), Limit: batchLimit})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("got %v, want the node's Unavailable", err)
	}
	if failing.checks.Load() != 1 || other.checks.Load() != 0 {
		t.Errorf("checks sent: %d to the failing node, %d to the other; want 1 and 0", failing.checks.Load(), other.checks.Load())
	}
}
