package rpc_test

import (
	"context"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/metrics"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/test/inproc"
)

// Decision metrics are labelled by stored policies only: a domain or a
// window a caller invents (an Envoy limit override no policy matches, an
// inline limit) is counted as "inline", so callers cannot mint series.
func TestDecisionLabelsAreBounded(t *testing.T) {
	node := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	if _, err := node.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
		{Name: "labelled", Limits: []*pb.PolicyLimit{pl("per-minute", pb.Algorithm_SLIDING_LOG, 10, 60_000)}},
	}}); err != nil {
		t.Fatal(err)
	}
	// Counters are the process's: read as differences, so the test also
	// holds under -count.
	inline := metrics.Decisions.WithLabelValues("inline", "limits[0]", metrics.Allowed, "strict")
	labelled := metrics.Decisions.WithLabelValues("labelled", "per-minute", metrics.Allowed, "strict")
	before, labelledBefore := value(t, inline), value(t, labelled)
	override := &rlsv3.RateLimitRequest{Domain: "invented-domain", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "1"}},
		Limit:   &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: 2}, // per minute
	}}}
	rls := rlsv3.NewRateLimitServiceClient(node.Conn())
	if resp, err := rls.ShouldRateLimit(ctx, override); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("override: %v %v", resp, err)
	}
	if _, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Key: "k", Limit: &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 3, WindowMs: 12_345}}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Limiter().Allow(ctx, &pb.AllowRequest{Key: "k", Policy: "labelled"}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, inline) - before; got != 2 {
		t.Errorf("inline decisions counted %v, want 2 (the override and the inline limit)", got)
	}
	if got := value(t, labelled) - labelledBefore; got != 1 {
		t.Errorf("the stored policy's series counted %v, want 1", got)
	}
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "invented-domain" {
					t.Errorf("%s has a series labelled with the caller's domain: %v", f.GetName(), m)
				}
			}
		}
	}
}

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A check refused before it reaches a leader (a request that does not
// validate) is a check answered with an error, counted by its code, once
// per check of the request, on every interface.
func TestRefusedChecksAreCounted(t *testing.T) {
	node := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	invalid := metrics.CheckErrors.WithLabelValues("InvalidArgument")
	before := value(t, invalid)
	bad := &pb.AllowRequest{Key: "k", Limit: &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 0, WindowMs: 60_000}}
	if _, err := node.Limiter().Allow(ctx, bad); err == nil {
		t.Fatal("Allow with limit 0 answered")
	}
	if _, err := node.Limiter().AllowBatch(ctx, &pb.AllowBatchRequest{Requests: []*pb.AllowRequest{{Key: "j", Limit: bad.Limit}, bad}}); err == nil {
		t.Fatal("AllowBatch with limit 0 answered")
	}
	rls := rlsv3.NewRateLimitServiceClient(node.Conn())
	if _, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "1"}},
		Limit:   &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 0, Unit: 2},
	}}}); err == nil {
		t.Fatal("ShouldRateLimit with an override of 0 answered")
	}
	if got := value(t, invalid) - before; got != 4 {
		t.Errorf("floodgate_check_errors_total{code=\"InvalidArgument\"} rose by %v, want 4 (1 Allow, 2 in the batch, 1 descriptor)", got)
	}

	// A request refused for its size holds no checks: it counts once,
	// however many items it carried (a client's 400,000 empty items
	// counted 400,000, drowning every alert on the error ratio).
	before = value(t, invalid)
	huge := make([]*pb.AllowRequest, 50*validate.MaxBatch)
	descs := make([]*rlcommon.RateLimitDescriptor, 50*validate.MaxBatch)
	for i := range huge {
		huge[i] = &pb.AllowRequest{}
		descs[i] = &rlcommon.RateLimitDescriptor{}
	}
	if _, err := node.Limiter().AllowBatch(ctx, &pb.AllowBatchRequest{Requests: huge}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("AllowBatch of %d: %v, want InvalidArgument", len(huge), err)
	}
	if _, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: descs}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ShouldRateLimit of %d descriptors: %v, want InvalidArgument", len(descs), err)
	}
	if got := value(t, invalid) - before; got != 2 {
		t.Errorf("floodgate_check_errors_total{code=\"InvalidArgument\"} rose by %v for two requests refused for their size, want 2", got)
	}
}
