package client

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A nil request is refused as invalid, naming it, under FailOpen too, and
// nothing is sent. Before, Allow and Decide of nil, and AllowBatch of a
// list holding nil, panicked in the client's own check.
func TestNilRequestIsInvalid(t *testing.T) {
	live := &countingNode{}
	c, _ := batchClient(true, serveBatchNode(t, live))
	defer c.closeConns()
	ctx := context.Background()
	calls := map[string]func() error{
		"request":  func() error { _, err := c.Allow(ctx, nil); return err },
		"request ": func() error { _, err := c.Decide(ctx, nil); return err },
		"requests[1]": func() error {
			_, err := c.AllowBatch(ctx, []*pb.AllowRequest{{Key: "k", Limit: batchLimit}, nil})
			return err
		},
	}
	for field, call := range calls {
		err := call()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), strings.TrimSpace(field)+": missing") {
			t.Errorf("%s: %v, want InvalidArgument naming it", field, err)
		}
	}
	if n := live.checks.Load(); n != 0 {
		t.Errorf("the node was sent %d checks", n)
	}
}

// A batch of no checks is answered with no results, as a node answers it.
// Before, it returned a nil response and a nil error, and a caller
// reading resp.Results panicked.
func TestEmptyBatch(t *testing.T) {
	c, _ := batchClient(false, deadAddr(t))
	defer c.closeConns()
	for _, reqs := range [][]*pb.AllowRequest{nil, {}} {
		resp, err := c.AllowBatch(context.Background(), reqs)
		if err != nil || resp == nil || len(resp.Results) != 0 {
			t.Errorf("AllowBatch(%v) = %v, %v; want no results and no error", reqs, resp, err)
		}
	}
}
