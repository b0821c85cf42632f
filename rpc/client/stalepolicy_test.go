package client

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// changedPolicies lists policy "api" without key_by at the client's first
// load, and with key_by [key], as the cluster now has it, afterwards.
type changedPolicies struct {
	*statusNode
	lists atomic.Int64
}

func (a *changedPolicies) api() *pb.Policy {
	p := &pb.Policy{Name: "api", Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 5, WindowMs: 60000}}}}
	if a.lists.Load() > 1 {
		p.KeyBy = []string{"key"}
	}
	return p
}

func (a *changedPolicies) ListPolicies(context.Context, *pb.ListPoliciesRequest) (*pb.ListPoliciesResponse, error) {
	a.lists.Add(1)
	return &pb.ListPoliciesResponse{Policies: []*pb.Policy{a.api()}}, nil
}

func (a *changedPolicies) GetPolicy(context.Context, *pb.GetPolicyRequest) (*pb.Policy, error) {
	return a.api(), nil
}

// keyedByNode is a node after "api" changed to key_by [key]: a plain key
// is refused (nothing counted), descriptors are answered.
type keyedByNode struct {
	pb.UnimplementedRateLimiterServer
}

func (keyedByNode) Allow(_ context.Context, r *pb.AllowRequest) (*pb.AllowResponse, error) {
	if r.Key != "" {
		return nil, status.Error(codes.InvalidArgument, "invalid request: key: policy api "+validate.KeyedByDescriptors+" key")
	}
	return &pb.AllowResponse{Allowed: true, Key: "key=" + r.Descriptors["key"]}, nil
}

// A node refusing a check of a policy the client knows starts a refresh:
// the client's copy may be stale (here the policy's key_by changed), and
// the checks after it are built from the new copy, without waiting for
// the next refresh (RefreshInterval, an hour here). Before, every check
// of that policy failed until then.
func TestANodesRefusalOfAKnownPolicyRefreshesIt(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm := &changedPolicies{statusNode: &statusNode{answers: 1 << 30}}
	s := grpc.NewServer()
	pb.RegisterAdminServer(s, adm)
	pb.RegisterRateLimiterServer(s, keyedByNode{})
	go s.Serve(lis)
	defer s.Stop()
	adm.nodes = []string{lis.Addr().String()}
	c, err := New(context.Background(), Options{Addrs: adm.nodes, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Policy("api").Allow(context.Background(), D{"key": "42"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("the first check, on the stale copy: %v, want the node's refusal", err)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := c.Policy("api").Allow(context.Background(), D{"key": "42"})
		if err == nil && d.Allowed {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("5 s after the node's refusal: %+v, %v; the copy was not refreshed", d, err)
		}
	}
}
