package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A flood of new keys against groups at --max-key-states: each group takes
// keys up to its bound and refuses the rest (gRPC ResourceExhausted, HTTP
// 429, naming the flag; Envoy's RLS OVER_LIMIT; nothing counted),
// whichever node a check enters by; keys it holds go on being counted, in
// single and batch calls; and once the states expire the groups take new
// keys again by themselves.
func TestMaxKeyStatesRefusesNewKeys(t *testing.T) {
	t.Parallel()
	const perGroup = 20
	c := startCluster(t, 3, "--max-key-states", fmt.Sprint(perGroup))
	setPolicies(t, c, `
policies:
  - name: edge.remote_address
    limits:
      - {algorithm: fixed_window, limit: 5, window: 1h}
  - name: shadowed
    mode: shadow
    limits:
      - {algorithm: fixed_window, limit: 5, window: 10s}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A sliding log's state lives until a window after its last hit. A
	// fixed window's ends at the next epoch-aligned multiple of its window:
	// with 10 s windows, a flood taken just before such a boundary expired
	// before the checks below, and a group full a moment before took a
	// new key (the HTTP check failed twice in CI runs, 90 and 244 ms after
	// a boundary).
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 5, WindowMs: 10_000}
	allow := func(n *Node, key string) error {
		_, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: key, Limit: lim})
		return err
	}

	var taken []string
	refused := 0
	for i := range 200 {
		key := fmt.Sprintf("flood-%d", i)
		err := allow(c.Nodes[i%3], key)
		switch {
		case err == nil:
			taken = append(taken, key)
		case status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "--max-key-states (20)"):
			refused++
		default:
			t.Fatalf("%s: %v", key, err)
		}
	}
	if len(taken) != 3*perGroup || refused != 200-3*perGroup {
		t.Fatalf("%d keys taken and %d refused, want %d and %d", len(taken), refused, 3*perGroup, 200-3*perGroup)
	}

	// A shadow policy's new keys are answered would-deny, counted nowhere.
	for i := range 5 {
		r, err := c.Nodes[i%3].Limiter().Allow(ctx, &pb.AllowRequest{Key: fmt.Sprintf("shadow-%d", i), Policy: "shadowed"})
		if err != nil || !r.Allowed || !r.WouldDeny {
			t.Fatalf("shadow key %d: %v %v, want allowed and would-deny", i, r, err)
		}
	}
	// Envoy: a descriptor of a new key is OVER_LIMIT, so Envoy's failure
	// mode does not let the flood through.
	rls := rlsv3.NewRateLimitServiceClient(c.Nodes[2].Conn())
	over := 0
	for i := range 30 {
		r, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*rlcommon.RateLimitDescriptor{rlsDesc("remote_address", fmt.Sprintf("10.9.0.%d", i))}})
		if err != nil {
			t.Fatalf("RLS, address %d: %v", i, err)
		}
		if r.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			over++
		}
	}
	if over != 30 {
		t.Errorf("RLS: %d of 30 new addresses refused by full groups", over)
	}
	// Keys held go on, alone and beside a new key in a batch.
	if err := allow(c.Nodes[2], taken[0]); err != nil {
		t.Fatalf("a held key: %v", err)
	}
	resp, err := c.Nodes[1].Limiter().AllowBatch(ctx, &pb.AllowBatchRequest{Requests: []*pb.AllowRequest{
		{Key: taken[1], Limit: lim}, {Key: "flood-new", Limit: lim}, {Key: taken[2], Limit: lim}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted, codes.OK} {
		r := resp.Results[i]
		got := codes.OK
		if r.GetError() != nil {
			got = codes.Code(r.GetError().Code)
		}
		if got != want || (want == codes.OK && !r.GetResponse().GetAllowed()) {
			t.Errorf("batch item %d: %v (%v), want %v", i, got, r, want)
		}
	}
	res, body := httpGet(t, "http://"+c.Nodes[0].HTTP+"/api/v1/limit?key=flood-http&limit=5&window=10s")
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "RESOURCE_EXHAUSTED") || !strings.Contains(body, "--max-key-states") {
		t.Errorf("HTTP: %d %s", res.StatusCode, body)
	}

	// The groups' leaders counted every refusal, shadow ones too: what
	// the FloodgateKeyStatesFull alert watches.
	total := 0.0
	for _, n := range c.Nodes {
		total += value(scrape(t, n), "floodgate_key_states_refused_total", nil)
	}
	if want := float64(refused + over + 1 + 1 + 5); total != want {
		t.Errorf("floodgate_key_states_refused_total over the nodes: %v, want %v", total, want)
	}

	// The 10 s windows pass from the flood's hits; the groups sweep the
	// expired states (an idle group writes a tick every 10 s) and take new
	// keys again.
	for i := 0; ; i++ {
		err := allow(c.Nodes[0], fmt.Sprintf("after-%d", i))
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted || ctx.Err() != nil {
			t.Fatalf("after the windows passed: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// One batch of new keys into a group far from its bound is taken up to the
// bound, exactly: each check is judged against what the batch's earlier
// checks add, not the most they could (nine states a check, which refused
// all but 112 of a batch of 1,000 into an empty group of a bound of 1,000).
func TestMaxKeyStatesBatchTakenToTheBound(t *testing.T) {
	t.Parallel()
	const bound = 300
	c := startCluster(t, 1, "--max-key-states", fmt.Sprint(bound))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 5, WindowMs: 3_600_000}
	var reqs []*pb.AllowRequest
	for i := range bound + 50 {
		reqs = append(reqs, &pb.AllowRequest{Key: fmt.Sprintf("batch-%d", i), Limit: lim})
	}
	resp, err := c.Nodes[0].Limiter().AllowBatch(ctx, &pb.AllowBatchRequest{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	taken, refused := 0, 0
	for i, r := range resp.Results {
		switch {
		case r.Error == nil && r.Response.GetAllowed():
			taken++
		case r.Error != nil && codes.Code(r.Error.Code) == codes.ResourceExhausted:
			refused++
		default:
			t.Fatalf("item %d: %v", i, r)
		}
	}
	if taken != bound || refused != 50 {
		t.Fatalf("%d taken and %d refused, want %d and 50", taken, refused, bound)
	}
}

// A flood of large states against a group at --max-state-mib: one caller
// of the check port makes inline sliding logs at --max-log-length, each
// filled by one check (80 KB a key on every replica: 20 such batches held
// 1.65 GB before the bound). The group takes them until its states would
// hold more than the bound and refuses the rest (ResourceExhausted,
// naming the flag; nothing counted), its states never holding more;
// checks that add little go on, and the node says what its states hold.
func TestMaxStateBytesRefusesLargeStates(t *testing.T) {
	t.Parallel()
	const mib = 1
	c := startCluster(t, 1, "--max-state-mib", fmt.Sprint(mib))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10_000, WindowMs: 3_600_000}
	taken, refused := floodBatches(ctx, t, c.Nodes[0], 4, 10, "--max-state-mib", func(key string) *pb.AllowRequest {
		return &pb.AllowRequest{Key: "big-" + key, Limit: big, Cost: proto.Int64(10_000)}
	})
	// 80 KB a state (its ring as the allocator rounds it up): 12 fit in a
	// MiB, judged at most a quarter more each.
	if taken < 9 || taken > 12 || refused != 40-taken {
		t.Fatalf("%d taken and %d refused of 40 states of 80 KB under %d MiB", taken, refused, mib)
	}
	// One refused: nothing was counted on it.
	resp, err := c.Nodes[0].Limiter().Allow(ctx, &pb.AllowRequest{Key: "big-3-9", Limit: big, Cost: proto.Int64(0)})
	if err != nil || resp.Remaining != 10_000 {
		t.Fatalf("a refused key after the flood: %v, %v", resp, err)
	}
	small := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 5, WindowMs: 3_600_000}
	if _, err := c.Nodes[0].Limiter().Allow(ctx, &pb.AllowRequest{Key: "small", Limit: small}); err != nil {
		t.Fatalf("a small new state under the bound: %v", err)
	}
	held := value(scrape(t, c.Nodes[0]), "floodgate_key_state_bytes", nil)
	t.Logf("%d states of 80 KB taken, %d refused; the states hold %.0f bytes", taken, refused, held)
	if held < float64(taken)*80_000 || held > mib<<20 {
		t.Fatalf("floodgate_key_state_bytes %.0f for %d states of 80 KB under %d MiB", held, taken, mib)
	}
}

// One slot's states are bounded (48 MiB, the most a slot move carries)
// whatever the group's bound: a colocated policy, all of whose keys share
// one slot, has its checks that add states refused ResourceExhausted
// naming the slot once it is full, while keys of other slots are taken.
// Before, such a slot grew until a join or leave could not move it, and
// stayed frozen, its checks refused, until its states expired.
func TestOneSlotIsBounded(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	setPolicies(t, c, `
policies:
  - name: shop
    colocate: true
    limits:
      - {algorithm: sliding_log, limit: 10000, window: 1h}
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 800 logs of 10,000 timestamps: 64 MB.
	taken, refused := floodBatches(ctx, t, c.Nodes[0], 8, 100, "slot", func(key string) *pb.AllowRequest {
		return &pb.AllowRequest{Key: "u-" + key, Policy: "shop", Cost: proto.Int64(10_000)}
	})
	// 80 KB a log: about 600 in 48 MiB.
	if taken < 500 || taken > 630 || refused != 800-taken {
		t.Fatalf("%d taken and %d refused of 800 logs of 80 KB in one slot", taken, refused)
	}
	big := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10_000, WindowMs: 3_600_000}
	if resp, err := c.Nodes[0].Limiter().Allow(ctx, &pb.AllowRequest{Key: "elsewhere", Limit: big, Cost: proto.Int64(10_000)}); err != nil || !resp.Allowed {
		t.Fatalf("a log of another slot: %v, %v", resp, err)
	}
	if resp, err := c.Nodes[0].Limiter().Allow(ctx, &pb.AllowRequest{Key: "u-0-0", Policy: "shop", Cost: proto.Int64(0)}); err != nil || resp.Remaining != 0 {
		t.Fatalf("a peek at a full log of the full slot: %v, %v", resp, err)
	}
}

// floodBatches sends batches calls of AllowBatch of size checks each to
// n, the checks made by req from keys "B-I", and counts those taken and
// those refused ResourceExhausted with a message naming refusal; any other
// answer fails the test.
func floodBatches(ctx context.Context, t *testing.T, n *Node, batches, size int, refusal string, req func(key string) *pb.AllowRequest) (taken, refused int) {
	t.Helper()
	for b := range batches {
		var reqs []*pb.AllowRequest
		for i := range size {
			reqs = append(reqs, req(fmt.Sprintf("%d-%d", b, i)))
		}
		resp, err := n.Limiter().AllowBatch(ctx, &pb.AllowBatchRequest{Requests: reqs})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range resp.Results {
			switch {
			case r.Error == nil && r.Response.GetAllowed():
				taken++
			case r.Error != nil && codes.Code(r.Error.Code) == codes.ResourceExhausted && strings.Contains(r.Error.Message, refusal):
				refused++
			default:
				t.Fatalf("batch %d item %d: %v", b, i, r)
			}
		}
	}
	return taken, refused
}
