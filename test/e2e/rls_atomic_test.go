package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The descriptors of one Envoy request under a colocated policy are one
// atomic set, through any node (the entry node forwards the set whole to
// the group's leader): a request one of them refuses counts in none of
// them, strict or fast. Under a policy that does not colocate, each is counted on its own.
func TestEnvoyAtomicDescriptors(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	setPolicies(t, c, `
policies:
  - name: shop
    colocate: true
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 2, window: 1m}
  - name: shopfast
    colocate: true
    consistency: fast
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 2, window: 1m}
  - name: free
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 2, window: 1m}
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := c.Running()
	call := func(node int, domain string, ds ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := rlsv3.NewRateLimitServiceClient(nodes[node%len(nodes)].Conn()).ShouldRateLimit(ctx,
			&rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	peek := func(domain, user string) uint32 {
		t.Helper()
		d := rlsDesc("user", user)
		d.HitsAddend = wrapperspb.UInt64(0)
		return call(0, domain, d).Statuses[0].LimitRemaining
	}
	for n, domain := range []string{"shop", "shopfast", "free"} {
		atomic := domain != "free"
		// Exhaust user a, through every node in turn.
		for i := range 2 {
			if r := call(n+i, domain, rlsDesc("user", "a")); r.OverallCode != rlsv3.RateLimitResponse_OK {
				t.Fatalf("%s: user a, request %d: %v", domain, i, r.OverallCode)
			}
		}
		// One request for users b, a and c, sent to each node.
		for node := range nodes {
			r := call(node, domain, rlsDesc("user", "b"), rlsDesc("user", "a"), rlsDesc("user", "c"))
			if r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || r.Statuses[1].Code != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("%s via node %d: %v", domain, node, r)
			}
			// Under free, b and c are admitted (and counted) until the
			// second request has used them up.
			refused := r.Statuses[0].Code == rlsv3.RateLimitResponse_OVER_LIMIT && r.Statuses[2].Code == rlsv3.RateLimitResponse_OVER_LIMIT
			if refused != (atomic || node >= 2) {
				t.Fatalf("%s via node %d: b and c answered %v and %v", domain, node, r.Statuses[0].Code, r.Statuses[2].Code)
			}
		}
		b, cc := peek(domain, "b"), peek(domain, "c")
		switch {
		case atomic && (b != 2 || cc != 2):
			t.Fatalf("%s: the refused requests counted: b has %d left, c %d, want 2 and 2", domain, b, cc)
		case domain == "free" && (b != 0 || cc != 0):
			t.Fatalf("free: each descriptor counts on its own: b has %d left, c %d, want 0 and 0", b, cc)
		}
	}
	// An admitted set counts in every key, once per descriptor.
	if r := call(1, "shop", rlsDesc("user", "b"), rlsDesc("user", "c"), rlsDesc("user", "c")); r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("b, c, c: %v", r)
	}
	if b, cc := peek("shop", "b"), peek("shop", "c"); b != 1 || cc != 0 {
		t.Fatalf("after b, c, c: b has %d left, c %d, want 1 and 0", b, cc)
	}

	// Colocation is fixed once a policy exists: changing it would move
	// every count. The refusal names the field and changes nothing.
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte("policies:\n  - name: shop\n    limits:\n      - {name: per-minute, algorithm: sliding_log, limit: 2, window: 1m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := c.Ctl(ctx, nodes[2].GRPC, "policy", "set", "-f", file)
	if err == nil || !strings.Contains(err.Error(), "policies[0].colocate") {
		t.Fatalf("changing colocate: %v\n%s", err, out)
	}
	// policy apply, a dry run too, says so before sending anything.
	for _, args := range [][]string{{"policy", "apply", "-f", file, "--dry-run"}, {"policy", "apply", "-f", file}} {
		out, err := c.Ctl(ctx, nodes[2].GRPC, args...)
		if err == nil || !strings.Contains(err.Error(), "policies[0].colocate: policy shop exists with colocate true") {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	if b := peek("shop", "b"); b != 1 {
		t.Fatalf("after the refused change: b has %d left, want 1", b)
	}
}
