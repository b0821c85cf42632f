package rpc

import (
	"context"
	"strings"
	"testing"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A batch's requests with equal inline limits share one policy, so its log
// entry and forwards carry it once; a bad request names its index.
func TestParseBatchSharesEqualInlineLimits(t *testing.T) {
	s := &Server{}
	a := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 1000}
	b := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 11, WindowMs: 1000}
	reqs := []*pb.AllowRequest{{Key: "k0", Limit: a}, {Key: "k1", Limit: b}, {Key: "k2", Limit: a}, {Key: "k3", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 1000}}}
	checks, err := s.parseBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if checks[0].Policy != checks[2].Policy || checks[0].Policy != checks[3].Policy {
		t.Error("requests with equal inline limits got different policies")
	}
	if checks[1].Policy == checks[0].Policy || checks[1].Policy.Limits[0].Limit.Limit != 11 {
		t.Errorf("request 1 got policy %+v", checks[1].Policy)
	}
	reqs[2] = &pb.AllowRequest{Key: "k2", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 0, WindowMs: 1000}}
	if _, err := s.parseBatch(context.Background(), reqs); err == nil || !strings.Contains(err.Error(), "requests[2].limit.limit") {
		t.Errorf("a bad third request: %v", err)
	}
}
