package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// policyNode is a node that, like a real one, checks a batch whole
// before counting any of it: a batch naming a policy it does not have is
// refused (InvalidArgument, naming the item) and counts nothing.
type policyNode struct {
	countingNode
	policies []string
}

func (n *policyNode) AllowBatch(ctx context.Context, req *pb.AllowBatchRequest) (*pb.AllowBatchResponse, error) {
	for i, r := range req.Requests {
		if r.Policy != "" && !slices.Contains(n.policies, r.Policy) {
			return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("invalid request: requests[%d].policy: unknown policy %q", i, r.Policy))
		}
	}
	return n.countingNode.AllowBatch(ctx, req)
}

// A batch with an item naming a policy the client has not learned (a
// typo, or a policy made since the last refresh) is checked whole, by one
// node, as the same batch sent to a node is: a name the cluster does not
// know fails the whole call, naming the caller's item, and counts
// nothing. Before, the batch was split by leader first: each node checked
// only its part, the nodes without the bad item counted theirs, and the
// error named the item's index in its node's part (requests[0]), not in
// the caller's batch.
func TestBatchWithAnUnknownPolicyCountsNothing(t *testing.T) {
	a, b := &policyNode{}, &policyNode{}
	c, _ := batchClient(false, serveBatchNode(t, a), serveBatchNode(t, b))
	defer c.closeConns()
	reqs := []*pb.AllowRequest{
		{Key: keyOfShard(0, 2), Limit: batchLimit},
		{Key: keyOfShard(0, 2), Limit: batchLimit},
		{Key: keyOfShard(1, 2), Policy: "nope"},
	}
	resp, err := c.AllowBatch(context.Background(), reqs)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "requests[2].policy") {
		t.Errorf("got %v, %v; want InvalidArgument naming requests[2].policy", resp, err)
	}
	if a.checks.Load() != 0 || b.checks.Load() != 0 {
		t.Errorf("the nodes counted %d and %d checks of a batch with an unknown policy, want none", a.checks.Load(), b.checks.Load())
	}
	// A policy the cluster has but the client has not learned yet: the
	// whole batch is answered, in order, each check counted once.
	a.policies, b.policies = []string{"new"}, []string{"new"}
	reqs[2].Policy = "new"
	resp, err = c.AllowBatch(context.Background(), reqs)
	if err != nil || len(resp.Results) != 3 {
		t.Fatalf("got %v, %v", resp, err)
	}
	for i, it := range resp.Results {
		if it.GetResponse().GetKey() != reqs[i].Key {
			t.Errorf("result %d is of key %q, want %q", i, it.GetResponse().GetKey(), reqs[i].Key)
		}
	}
	if n := a.checks.Load() + b.checks.Load(); n != 3 {
		t.Errorf("the nodes counted %d checks, want 3", n)
	}
}

// A node's refusal of its part of a batch (a check only the node can
// refuse, such as a sliding log over its --max-log-length) names the item
// by its index in the caller's batch, not in the part the node was sent.
// Before, the caller's requests[1] was reported as requests[0].
func TestBatchRefusalNamesTheCallersItem(t *testing.T) {
	up := serveBatchNode(t, &batchNode{})
	refusing := serveBatchNode(t, &batchNode{err: status.Error(codes.InvalidArgument, "invalid request: requests[1].limit.limit: over --max-log-length")})
	c, _ := batchClient(false, up, refusing)
	defer c.closeConns()
	reqs := []*pb.AllowRequest{
		{Key: keyOfShard(1, 2), Limit: batchLimit},
		{Key: keyOfShard(0, 2), Limit: batchLimit},
		{Key: keyOfShard(1, 2), Limit: batchLimit},
	}
	resp, err := c.AllowBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		e := resp.Results[i].GetError()
		if e == nil || codes.Code(e.Code) != codes.InvalidArgument || !strings.Contains(e.Message, "requests[2].limit.limit") {
			t.Errorf("item %d: %v, want InvalidArgument naming requests[2].limit.limit", i, resp.Results[i])
		}
	}
	if !resp.Results[1].GetResponse().GetAllowed() {
		t.Errorf("item 1: %v, want the other node's answer", resp.Results[1])
	}
}

// emptyNode answers every check of a batch with an item holding neither a
// decision nor an error, as a broken node might.
type emptyNode struct {
	pb.UnimplementedRateLimiterServer
}

func (emptyNode) AllowBatch(_ context.Context, req *pb.AllowBatchRequest) (*pb.AllowBatchResponse, error) {
	out := &pb.AllowBatchResponse{}
	for range req.Requests {
		out.Results = append(out.Results, &pb.AllowBatchItem{})
	}
	return out, nil
}

// An empty item is an error of that item (Internal), through AllowBatch
// as through a coalesced Allow, not passed on to read as a denial. Before,
// AllowBatch passed it on.
func TestBatchEmptyItemIsAnError(t *testing.T) {
	c, _ := batchClient(false, serveBatchNode(t, emptyNode{}))
	defer c.closeConns()
	resp, err := c.AllowBatch(context.Background(), []*pb.AllowRequest{{Key: "x", Limit: batchLimit}})
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.Results[0].GetError(); e == nil || codes.Code(e.Code) != codes.Internal {
		t.Errorf("an empty item came back as %v, want an Internal error", resp.Results[0])
	}
}
