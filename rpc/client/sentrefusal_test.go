package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

// hangingNode takes every Allow and never answers it: the answer is lost.
type hangingNode struct {
	pb.UnimplementedRateLimiterServer
	calls atomic.Int64
}

func (n *hangingNode) Allow(ctx context.Context, _ *pb.AllowRequest) (*pb.AllowResponse, error) {
	n.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// refusingNode refuses every Allow, as a node refuses a plain key for a
// policy that keys by descriptors.
type refusingNode struct {
	pb.UnimplementedRateLimiterServer
}

func (refusingNode) Allow(context.Context, *pb.AllowRequest) (*pb.AllowResponse, error) {
	return nil, status.Error(codes.InvalidArgument, "key: policy q builds its keys from descriptors user")
}

// A check the client's copy of its policy refuses is sent anyway (the
// copy may be stale); when its answer is lost, FailOpen does not admit it
// and the copy's refusal stands, but marked: the node may have counted
// it. Policy.AllowN resends a check a node refused (a refusal counts
// nothing) after learning the policy; unmarked, a copy learned by a
// refresh between AllowN's look at the policies and the check's had the
// check sent twice, against "a timed-out request may or may not have
// counted, never twice".
func TestALostAnswerToACheckTheCopyRefusedIsNotANodesRefusal(t *testing.T) {
	n := &hangingNode{}
	addr := serveBatchNode(t, n)
	c, _ := batchClient(true, addr)
	defer c.closeConns()
	c.opts.CallTimeout = 100 * time.Millisecond
	c.policies = map[string]*policy.Policy{"p": {Name: "p", KeyBy: []string{"user"},
		Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 5, Window: int64(time.Second)}}}}}
	_, open, err := c.allow(context.Background(), &pb.AllowRequest{Policy: "p", Key: "k"})
	if open || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("open %v, err %v: want the copy's refusal (InvalidArgument), not admitted", open, err)
	}
	if got := n.calls.Load(); got != 1 {
		t.Fatalf("the node was asked %d times, want once", got)
	}
	var sent sentRefusal
	if !errors.As(err, &sent) {
		t.Errorf("%v is not marked as a refusal of a check that was sent: AllowN would send it again", err)
	}
	// A node's own refusal is not marked: nothing was counted.
	refusing := serveBatchNode(t, refusingNode{})
	c2, _ := batchClient(true, refusing)
	defer c2.closeConns()
	_, _, err = c2.allow(context.Background(), &pb.AllowRequest{Policy: "q", Key: "k"})
	if status.Code(err) != codes.InvalidArgument || errors.As(err, &sent) {
		t.Errorf("a node's refusal: %v, want InvalidArgument, not marked as sent", err)
	}
}
