package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// rlsDesc builds a descriptor as Envoy's rate limit filter sends it.
func rlsDesc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// Envoy's rate limit filter, as Envoy calls it: the generated RLS v3
// client against every node of a real cluster.
func TestEnvoyRateLimitService(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	setPolicies(t, c, `
policies:
  - name: edge.remote_address
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 5, window: 1m}
  - name: gw
    limits:
      - {algorithm: sliding_log, limit: 5, window: 1m}
  - name: shadowed
    mode: shadow
    limits:
      - {algorithm: sliding_log, limit: 1, window: 1m}
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := c.Running()
	rls := func(i int) rlsv3.RateLimitServiceClient {
		return rlsv3.NewRateLimitServiceClient(nodes[i%len(nodes)].Conn())
	}

	ip := rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{rlsDesc("remote_address", "10.0.0.1")}}
	for i := range 7 {
		resp, err := rls(i).ShouldRateLimit(ctx, &ip)
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Statuses[0]
		wantCode := rlsv3.RateLimitResponse_OK
		if i >= 5 {
			wantCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if resp.OverallCode != wantCode || st.Code != wantCode {
			t.Fatalf("request %d: overall %v status %v, want %v", i, resp.OverallCode, st.Code, wantCode)
		}
		if cl := st.CurrentLimit; cl.GetRequestsPerUnit() != 5 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || cl.GetName() != "per-minute" {
			t.Fatalf("request %d: current limit %v", i, cl)
		}
		if want := uint32(max(4-i, 0)); st.LimitRemaining != want {
			t.Fatalf("request %d: remaining %d, want %d", i, st.LimitRemaining, want)
		}
		if d := st.DurationUntilReset.AsDuration(); d <= 0 || d > time.Minute {
			t.Fatalf("request %d: duration until reset %s", i, d)
		}
	}

	// One request, three descriptors: a fresh address, the exhausted one
	// and one no policy matches. Over the limit overall; each answered.
	resp, err := rls(0).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
		rlsDesc("remote_address", "10.0.0.2"), rlsDesc("remote_address", "10.0.0.1"), rlsDesc("path", "/"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OK ||
		resp.Statuses[1].Code != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[2].Code != rlsv3.RateLimitResponse_OK ||
		resp.Statuses[2].CurrentLimit != nil {
		t.Fatalf("mixed request: %v", resp)
	}

	// A descriptor's own hits_addend of 0 peeks: nothing counted.
	peek := rlsDesc("remote_address", "10.0.0.2")
	peek.HitsAddend = wrapperspb.UInt64(0)
	for range 3 {
		resp, err := rls(1).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{peek}})
		if err != nil || resp.Statuses[0].LimitRemaining != 4 {
			t.Fatalf("peek: %v %v, want remaining 4 each time", resp, err)
		}
	}

	// A cost above the limit is OVER_LIMIT, counting nothing: an error
	// would let the request through under failure_mode_deny: false.
	big := rlsDesc("remote_address", "10.0.0.4")
	big.HitsAddend = wrapperspb.UInt64(6)
	resp, err = rls(2).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{big}})
	if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].LimitRemaining != 5 ||
		resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 {
		t.Fatalf("hits_addend 6 of a limit of 5: %v %v, want OVER_LIMIT with 5 remaining", resp, err)
	}
	big.HitsAddend = wrapperspb.UInt64(0)
	if resp, err := rls(0).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{big}}); err != nil || resp.Statuses[0].LimitRemaining != 5 {
		t.Fatalf("after a cost above the limit: %v %v, want nothing counted", resp, err)
	}

	// A value too long for a key (a long header, a long path) is counted
	// under its digest, not refused: an error would let it through.
	long := rlsDesc("remote_address", strings.Repeat("1", 2000))
	for i := range 6 {
		resp, err := rls(i).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{long}})
		if want := map[bool]rlsv3.RateLimitResponse_Code{true: rlsv3.RateLimitResponse_OK, false: rlsv3.RateLimitResponse_OVER_LIMIT}[i < 5]; err != nil || resp.OverallCode != want {
			t.Fatalf("a 2000-byte value, request %d: %v %v, want %v", i, resp, err, want)
		}
	}

	// So is a key of many entries too long even then, and an entry key
	// of characters no policy name holds (Envoy Gateway's route names):
	// under a domain's own policy, 5 a minute.
	var many []string
	for i := range 16 {
		many = append(many, fmt.Sprintf("h%02d", i), strings.Repeat("v", 70))
	}
	for name, d := range map[string]*rlcommon.RateLimitDescriptor{
		"16 values of 70 bytes": rlsDesc(many...),
		"a route name":          rlsDesc("httproute/default/backend/rule/0/match/0", "x"),
	} {
		for i := range 6 {
			resp, err := rls(i).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "gw", Descriptors: []*rlcommon.RateLimitDescriptor{d}})
			if want := map[bool]rlsv3.RateLimitResponse_Code{true: rlsv3.RateLimitResponse_OK, false: rlsv3.RateLimitResponse_OVER_LIMIT}[i < 5]; err != nil || resp.OverallCode != want {
				t.Fatalf("%s, request %d: %v %v, want %v", name, i, resp, err, want)
			}
		}
	}

	// Shadow mode: admitted, and Envoy told it would have been denied.
	for i := range 2 {
		resp, err := rls(i).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "shadowed", Descriptors: []*rlcommon.RateLimitDescriptor{rlsDesc("user", "1")}})
		if err != nil {
			t.Fatal(err)
		}
		md := resp.DynamicMetadata.GetFields()
		wouldDeny := md["floodgate.would_deny"].GetBoolValue()
		which := md["floodgate.would_deny_descriptors"].GetListValue().GetValues()
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OK || wouldDeny != (i == 1) ||
			(i == 1 && (len(which) != 1 || which[0].GetNumberValue() != 0)) {
			t.Fatalf("shadow request %d: %v", i, resp)
		}
	}

	// The descriptor's limit override, with no policy at all: 2 per hour,
	// a fixed window, which ends on the hour (UTC). Three checks that
	// straddle an hour's end are in two windows, and the third is
	// rightly admitted: such a run (the hours before the first and after
	// the third differ) runs again once, with a new tenant.
	for attempt := 0; ; attempt++ {
		over := rlsDesc("tenant", string(rune('a'+attempt)))
		over.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_HOUR}
		var codes3 []rlsv3.RateLimitResponse_Code
		hour := time.Now().Truncate(time.Hour)
		for i := range 3 {
			resp, err := rls(i).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "overrides", Descriptors: []*rlcommon.RateLimitDescriptor{over}})
			if err != nil {
				t.Fatal(err)
			}
			codes3 = append(codes3, resp.OverallCode)
		}
		if codes3[0] == rlsv3.RateLimitResponse_OK && codes3[1] == rlsv3.RateLimitResponse_OK && codes3[2] == rlsv3.RateLimitResponse_OVER_LIMIT {
			break
		}
		if attempt > 0 || time.Now().Truncate(time.Hour).Equal(hour) {
			t.Fatalf("override 2/hour: %v", codes3)
		}
		t.Logf("override 2/hour: %v across the end of an hour: once more", codes3)
	}

	// Bad input names the field and counts nothing.
	bad := rlsDesc("remote_address", "10.0.0.3")
	bad.IsNegativeHits = true
	for _, c := range []struct {
		req   *rlsv3.RateLimitRequest
		field string
	}{
		{&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{rlsDesc("remote_address", "10.0.0.3")}}, "domain"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{rlsDesc("remote_address", "10.0.0.3"), bad}}, "descriptors[1].is_negative_hits"},
	} {
		_, err := rls(2).ShouldRateLimit(ctx, c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.field) {
			t.Fatalf("bad request: %v, want InvalidArgument naming %s", err, c.field)
		}
	}
	fresh := rlsDesc("remote_address", "10.0.0.3")
	fresh.HitsAddend = wrapperspb.UInt64(0)
	if resp, err := rls(0).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{fresh}}); err != nil || resp.Statuses[0].LimitRemaining != 5 {
		t.Fatalf("a refused request counted: %v %v", resp, err)
	}
}
