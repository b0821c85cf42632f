package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// rlsCases are bad Envoy RLS requests. Each goes to every node, so that
// one of them leads the key's shard: a request a leader takes in without
// checking reaches its log, which the fixture sees. bi-soft (a soft policy
// at 1000% over, hourly sliding log of 50) is stored by the caller.
func rlsCases(f *badFixture) []grpcCase {
	override := func(domain string, n uint32, unit typev3.RateLimitUnit, mult uint32) *rlsv3.RateLimitRequest {
		var out []*rlcommon.RateLimitDescriptor
		for i := range 8 { // keys over every shard
			d := rlsDesc("user", fmt.Sprint(i))
			d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
			if mult > 0 {
				d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
			}
			out = append(out, d)
		}
		return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: out}
	}
	everyNode := func(req *rlsv3.RateLimitRequest) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			var last error
			for _, n := range f.c.Nodes {
				_, err := rlsv3.NewRateLimitServiceClient(n.Conn()).ShouldRateLimit(ctx, req)
				if err == nil {
					return status.Errorf(codes.Unknown, "node %s answered OK", n.ID)
				}
				if status.Code(err) != codes.InvalidArgument {
					return fmt.Errorf("node %s: %w", n.ID, err)
				}
				last = err
			}
			return last
		}
	}
	var many []string
	for i := range 33 {
		many = append(many, fmt.Sprintf("k%d", i), "v")
	}
	inv := codes.InvalidArgument
	return []grpcCase{
		{"override under a domain that cannot name a policy", everyNode(override("we ird!", 2, typev3.RateLimitUnit_MINUTE, 0)), inv, `domain: "we ird!" must be`},
		// An override a soft policy stretches past --max-log-length is no
		// longer bad input: a sliding counter counts it (rpc/rlsmap.go).
		{"calendar unit with a multiplier", everyNode(override("bi-soft", 500, typev3.RateLimitUnit_MONTH, 2)), inv,
			"descriptors[0].limit.unit_multiplier: only 1 with a calendar unit"},
		{"unit_multiplier past int64 nanoseconds", everyNode(override("edge", 3, typev3.RateLimitUnit_MINUTE, 307445735)), inv, "descriptors[0].limit.unit_multiplier: 307445735 minutes"},
		{"requests_per_unit above the largest limit", everyNode(override("edge", math.MaxUint32, typev3.RateLimitUnit_MINUTE, 0)), inv, "descriptors[0].limit.requests_per_unit:"},
		{"33 entries", everyNode(&rlsv3.RateLimitRequest{Domain: "bi-soft", Descriptors: []*rlcommon.RateLimitDescriptor{rlsDesc(many...)}}), inv, "descriptors[0].entries: 33 given"},
		{"empty entry key", everyNode(&rlsv3.RateLimitRequest{Domain: "bi-soft", Descriptors: []*rlcommon.RateLimitDescriptor{rlsDesc("a", "1", "", "2")}}), inv, "descriptors[0].entries[1].key: must not be empty"},
		{"no descriptors", everyNode(&rlsv3.RateLimitRequest{Domain: "bi-soft"}), inv, "descriptors: must not be empty"},
	}
}

// httpCase is a bad GET /api/v1/limit query and the field its 400 names.
type httpCase struct{ query, field string }

// httpCases runs bad HTTP checks against every node (so that one of them
// leads each key's shard): each must answer 400 in JSON naming the field,
// and change nothing. It returns how many inputs it sent.
func (f *badFixture) httpCases(t *testing.T) int {
	cases := []httpCase{ // {i} varies the key, so the keys fall on every shard
		{"key=%fe{i}&limit=3&window=10m", "key"},
		{"key=bi-utf8-{i}&key=x&limit=3&window=10m", "key"},
		{"descriptor=user%3D{i}%ff&policy=bi-api", "descriptors.user"},
		{"key=bi-http-{i}&limit=3&window=1500us", "window"},
		{"key=bi-http-{i}&limit=3&window=1.0005s", "window"},
		{"key=bi-http-{i}&limit=3&window=10m&cost=", "cost"},
		{"key=bi-http-{i}&limit=0&window=10m", "limit: must be between 1 and"},
		{"key=bi-http-{i}&limit=3&window=0s", "window: \"0s\" must be more than 0"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			before := f.capture(t)
			for i := range 8 { // keys over every shard, on every node
				q := strings.ReplaceAll(tc.query, "{i}", fmt.Sprint(i))
				for _, n := range f.c.Nodes {
					code, msg := httpError(t, "http://"+n.HTTP+"/api/v1/limit?"+q)
					if code != http.StatusBadRequest || !strings.Contains(msg, tc.field) {
						t.Fatalf("node %s, %s: %d %q, want 400 naming %s", n.ID, q, code, msg, tc.field)
					}
				}
			}
			f.unchanged(t, before, f.capture(t))
		})
	}
	return len(cases)
}

// httpError returns the status of a GET and the message of its JSON
// error.
func httpError(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, body := httpGet(t, url)
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	return resp.StatusCode, e.Error.Message
}
