package rpc_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc"
	"github.com/floodgate/floodgate/test/inproc"
)

func pl(name string, alg pb.Algorithm, limit, windowMs int64) *pb.PolicyLimit {
	return &pb.PolicyLimit{Name: name, Limit: &pb.Limit{Algorithm: alg, Limit: limit, WindowMs: windowMs}}
}

// Every bad policy field is refused with InvalidArgument naming it, and
// nothing is stored: not the bad policy, nor the good ones sent with it.
func TestBadPoliciesAreRefusedAndNothingStored(t *testing.T) {
	node := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	good := &pb.Policy{Name: "good", Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_SLIDING_LOG, 10, 60_000)}}
	for _, tc := range []struct {
		name  string
		p     *pb.Policy
		field string
	}{
		{"no name", &pb.Policy{Limits: good.Limits}, "policies[1].name:"},
		{"bad name", &pb.Policy{Name: "a/b", Limits: good.Limits}, "policies[1].name:"},
		{"no limits", &pb.Policy{Name: "empty"}, "policies[1].limits:"},
		{"duplicate windows", &pb.Policy{Name: "dup", Limits: []*pb.PolicyLimit{
			pl("a", pb.Algorithm_SLIDING_LOG, 10, 60_000), pl("b", pb.Algorithm_FIXED_WINDOW, 20, 60_000)}}, "policies[1].limits[1].limit.window_ms:"},
		{"soft overage out of range", &pb.Policy{Name: "soft", Mode: pb.Mode_MODE_SOFT, SoftPercent: 5000, Limits: good.Limits}, "policies[1].soft_percent:"},
		{"soft without overage", &pb.Policy{Name: "soft", Mode: pb.Mode_MODE_SOFT, Limits: good.Limits}, "policies[1].soft_percent:"},
		{"elastic without capacity", &pb.Policy{Name: "el", Mode: pb.Mode_MODE_ELASTIC, Elastic: &pb.Elastic{CeilingPercent: 200}, Limits: good.Limits}, "policies[1].elastic.capacity:"},
		{"calendar on a rolling algorithm", &pb.Policy{Name: "cal", Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{
			Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 20000, Calendar: pb.CalendarUnit_CALENDAR_UNIT_MONTH}}}}, "policies[1].limits[0].limit.calendar:"},
		{"bad reduced limit", &pb.Policy{Name: "red", Limits: good.Limits, Reduced: pl("r", pb.Algorithm_GCRA, 0, 1000)}, "policies[1].reduced.limit.limit:"},
		{"unknown mode", &pb.Policy{Name: "m", Mode: 9, Limits: good.Limits}, "policies[1].mode:"},
		{"bad key_by", &pb.Policy{Name: "k", KeyBy: []string{"user", "user"}, Limits: good.Limits}, "policies[1].key_by[1]:"},
		{"same name twice", &pb.Policy{Name: "good", Limits: good.Limits}, "policies[1].name:"},
	} {
		_, err := node.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{good, tc.p}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want InvalidArgument naming %s", tc.name, err, tc.field)
		}
	}
	list, err := node.Admin().ListPolicies(ctx, &pb.ListPoliciesRequest{})
	if err != nil || len(list.Policies) != 0 {
		t.Fatalf("refused requests stored policies: %v %v", list, err)
	}
	// Checks naming an unknown policy, or both a policy and a limit, fail.
	for _, req := range []*pb.AllowRequest{
		{Key: "k", Policy: "nope"},
		{Key: "k", Policy: "good", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1, WindowMs: 1000}},
	} {
		if _, err := node.Limiter().Allow(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", req, err)
		}
	}
	if _, err := node.Admin().DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: "nope"}); status.Code(err) == codes.OK {
		t.Error("deleted a policy that does not exist")
	}
}

func TestPolicyChecks(t *testing.T) {
	node := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	_, err := node.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
		{Name: "api", KeyBy: []string{"user", "ip"}, Limits: []*pb.PolicyLimit{
			pl("per-minute", pb.Algorithm_SLIDING_LOG, 3, 60_000),
			pl("per-hour", pb.Algorithm_SLIDING_COUNTER, 500, 3_600_000),
		}, Reduced: pl("slow-lane", pb.Algorithm_SLIDING_LOG, 1, 3_600_000)}, // not a fixed window: one ending (on the hour) between requests 3 and 4 admitted 4
		{Name: "dry-run", Mode: pb.Mode_MODE_SHADOW, Limits: []*pb.PolicyLimit{pl("", pb.Algorithm_TOKEN_BUCKET, 2, 60_000)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	desc := map[string]string{"ip": "10.0.0.1", "user": "42"}
	var answers []*pb.AllowResponse
	for i := 0; i < 5; i++ {
		resp, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Policy: "api", Descriptors: desc})
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, resp)
	}
	// Three under the minute, one more through the reduced limit, then no.
	for i, want := range []bool{true, true, true, true, false} {
		if answers[i].Allowed != want {
			t.Errorf("request %d allowed=%v, want %v", i, answers[i].Allowed, want)
		}
	}
	if answers[0].Key != "user=42,ip=10.0.0.1" || answers[0].DecidedBy != "per-minute" || answers[3].DecidedBy != "slow-lane" {
		t.Errorf("key %q, decided by %q then %q", answers[0].Key, answers[0].DecidedBy, answers[3].DecidedBy)
	}
	if _, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Policy: "api", Key: "raw"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a raw key on a key_by policy: %v", err)
	}
	if _, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Policy: "api", Descriptors: map[string]string{"user": "1"}}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), `missing "ip"`) {
		t.Errorf("a missing descriptor: %v", err)
	}
	// Shadow never denies, and says when it would have.
	for i := 0; i < 4; i++ {
		resp, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Policy: "dry-run", Key: "k"})
		if err != nil || !resp.Allowed || resp.WouldDeny != (i >= 2) {
			t.Errorf("shadow request %d: %v %v", i, resp, err)
		}
	}
	// A reset forgets the key: it is admitted again.
	reset, err := node.Admin().ResetKey(ctx, &pb.ResetKeyRequest{Policy: "api", Descriptors: desc})
	if err != nil || reset.States != 3 || reset.Key != "user=42,ip=10.0.0.1" {
		t.Fatalf("reset: %v %v", reset, err)
	}
	if resp, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Policy: "api", Descriptors: desc}); err != nil || !resp.Allowed || resp.Remaining != 2 {
		t.Fatalf("after reset: %v %v", resp, err)
	}
	got, err := node.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "api"})
	if err != nil || got.Reduced.GetName() != "slow-lane" || len(got.Limits) != 2 || got.Limits[1].Limit.Buckets != 60 {
		t.Fatalf("get: %v %v", got, err)
	}
	if _, err := node.Admin().DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: "dry-run"}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Policy: "dry-run", Key: "k"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a deleted policy still answers: %v", err)
	}
}

// A dry run (ValidatePolicies) refuses what SetPolicies would, with the
// same error: under the node's own --max-log-length, and a change the
// cluster's policies forbid. It stores nothing, valid or not.
func TestValidatePoliciesStoresNothing(t *testing.T) {
	node := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	peers := rpc.NewPeers()
	t.Cleanup(func() { _ = peers.Close() })
	// The Admin service of a node started with --max-log-length 100.
	capped := rpc.NewAdminServer(node.Node, peers, rpc.Config{MaxLogLength: 100})
	stored := &pb.Policy{Name: "stored", Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_SLIDING_LOG, 10, 60_000)}}
	if _, err := capped.SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{stored}}); err != nil {
		t.Fatal(err)
	}
	fresh := &pb.Policy{Name: "fresh", Limits: []*pb.PolicyLimit{pl("", pb.Algorithm_TOKEN_BUCKET, 5, 3_600_000)}}
	changed := &pb.Policy{Name: "stored", Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_SLIDING_LOG, 20, 60_000)}}
	for _, tc := range []struct {
		name string
		ps   []*pb.Policy
		code codes.Code
		msg  string // in the error
	}{
		{"valid", []*pb.Policy{fresh, changed}, codes.OK, ""},
		{"log over --max-log-length", []*pb.Policy{fresh, {Name: "logp", Limits: []*pb.PolicyLimit{pl("", pb.Algorithm_SLIDING_LOG, 500, 60_000)}}},
			codes.InvalidArgument, "policies[1].limits[0].limit.limit: a sliding_log keeps one timestamp per request and is capped at 100"},
		{"colocate changed", []*pb.Policy{fresh, {Name: "stored", Colocate: true, Limits: stored.Limits}},
			codes.FailedPrecondition, "policies[1].colocate: policy stored exists with colocate false"},
		{"no policies", nil, codes.InvalidArgument, "policies: give 1 to 1000, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := capped.ValidatePolicies(ctx, &pb.ValidatePoliciesRequest{Policies: tc.ps})
			if tc.code == codes.OK {
				if err != nil || strings.Join(resp.Names, ",") != "fresh,stored" {
					t.Fatalf("got %v, %v; want the names fresh, stored", resp, err)
				}
				return
			}
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %s naming %q", err, tc.code, tc.msg)
			}
			// The write's refusal, word for word.
			if _, setErr := capped.SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: tc.ps}); setErr == nil || setErr.Error() != err.Error() {
				t.Fatalf("SetPolicies answers %v, the dry run %v", setErr, err)
			}
		})
	}
	// Served on the node's gRPC port, with its own cap (the default).
	if _, err := node.Admin().ValidatePolicies(ctx, &pb.ValidatePoliciesRequest{Policies: []*pb.Policy{fresh}}); err != nil {
		t.Fatal(err)
	}
	list, err := node.Admin().ListPolicies(ctx, &pb.ListPoliciesRequest{})
	if err != nil || len(list.Policies) != 1 || list.Policies[0].Name != "stored" || list.Policies[0].Limits[0].Limit.Limit != 10 {
		t.Fatalf("after dry runs the cluster holds %v (%v), want only policy stored as it was", list, err)
	}
}
