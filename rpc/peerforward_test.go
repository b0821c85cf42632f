package rpc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/test/inproc"
	"github.com/floodgate/floodgate/window"
)

// forwardFixture is a settled one-node cluster (it leads every shard) and
// its Peer client, as another node would call it.
func forwardFixture(t *testing.T) (*inproc.Node, peerv1.PeerClient) {
	n := inproc.Cluster(t, 1)[0]
	return n, peerv1.NewPeerClient(n.Conn())
}

func logPolicy(limit int64, c policy.Consistency) []byte {
	p := policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{
		Algorithm: window.SlidingLog, Limit: limit, Window: int64(time.Hour)}}}, Consistency: c}
	return p.AppendBinary(nil)
}

// colocated encodes an hourly sliding log of 100 that colocates its keys
// under name.
func colocated(name string, c policy.Consistency) []byte {
	p := policy.Policy{Name: name, Colocate: true, Limits: []policy.Limit{{Limit: window.Limit{
		Algorithm: window.SlidingLog, Limit: 100, Window: int64(time.Hour)}}}, Consistency: c}
	return p.AppendBinary(nil)
}

// remaining peeks at key under an inline hourly sliding log of limit.
func remaining(t *testing.T, n *inproc.Node, key string, limit int64) int64 {
	t.Helper()
	resp, err := n.Limiter().Allow(context.Background(), &pb.AllowRequest{Key: key, Cost: cost(0),
		Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: limit, WindowMs: time.Hour.Milliseconds()}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Remaining
}

// A peer is validated like a client, and an invalid forwarded check fails
// alone: it is counted nowhere, names its field, and the honest checks of
// the same request are answered and counted as usual. Before, one bad
// item failed every check batched with it (strict) or made every replica
// refuse the replication batch, losing admitted counts (fast).
func TestForwardRefusesInvalidChecksAlone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		consistency policy.Consistency
	}{{"strict", policy.Strict}, {"fast", policy.Fast}} {
		t.Run(tc.name, func(t *testing.T) {
			n, peer := forwardFixture(t)
			shards := n.Node.Shards()
			key := "user:1"
			shard := hashing.ShardOf(key, shards)
			var bystander string
			for i := 2; bystander == "" || hashing.ShardOf(bystander, shards) != shard; i++ {
				bystander = fmt.Sprintf("user:%d", i)
			}
			other := (shard + 1) % shards
			good := logPolicy(100, tc.consistency)
			otherBefore := n.Node.Progress(other).Last
			req := &peerv1.ForwardRequest{Checks: []*peerv1.ForwardCheck{
				{Shard: uint32(shard), Key: key, Policy: good, Cost: 1},
				{Shard: uint32(shard), Key: key, Policy: good, Cost: -1},
				{Shard: uint32(shard), Key: key, Policy: logPolicy(20_000_000, tc.consistency), Cost: 1},
				{Shard: uint32(other), Key: key, Policy: good, Cost: 1},
				{Shard: uint32(shard), Key: bystander, Policy: good, Cost: 3},
				{Shard: uint32(shard), Key: "", Policy: good, Cost: 1},
				{Shard: uint32(shard), Key: key, Policy: []byte{0xff, 0x01}, Cost: 1},
				{Shard: uint32(shard), Key: key, Policy: good, Cost: 101},
				{Shard: uint32(shards + 5), Key: key, Policy: good, Cost: 1},
				{Shard: uint32(shard), Key: strings.Repeat("k", validate.MaxStoredKeyLen+1), Policy: good, Cost: 1},
				// A client's key rules, as the policy stores keys: no NUL
				// first, no longer than a client's, the hash tag exactly
				// when the policy colocates, and its own.
				{Shard: uint32(shard), Key: "\x00", Policy: good, Cost: 1},
				{Shard: uint32(shard), Key: "\x00shop\x00k", Policy: good, Cost: 1},
				{Shard: uint32(shard), Key: strings.Repeat("k", validate.MaxKeyLen+1), Policy: good, Cost: 1},
				{Shard: uint32(shard), Key: key, Policy: colocated("shop", tc.consistency), Cost: 1},
				{Shard: uint32(shard), Key: "\x00cart\x00k", Policy: colocated("shop", tc.consistency), Cost: 1},
				{Shard: uint32(shard), Key: "\x00shop\x00", Policy: colocated("shop", tc.consistency), Cost: 1},
			}}
			resp, err := peer.Forward(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			wantField := map[int]string{1: "checks[1].cost", 2: "checks[2].policy.limits[0].limit.limit",
				3: "checks[3].shard", 5: "checks[5].key", 6: "checks[6].policy", 7: "checks[7].cost",
				8: "checks[8].shard", 9: "checks[9].key", 10: "checks[10].key", 11: "checks[11].key", 12: "checks[12].key",
				13: "checks[13].key", 14: "checks[14].key", 15: "checks[15].key"}
			for i, r := range resp.Results {
				field, bad := wantField[i]
				switch {
				case bad && (r.Code != peerv1.ForwardResult_INVALID || !strings.Contains(r.Message, field)):
					t.Errorf("check %d: %v %q, want INVALID naming %s", i, r.Code, r.Message, field)
				case !bad && (r.Code != peerv1.ForwardResult_OK || !r.Decision.GetAllowed()):
					t.Errorf("check %d: %v %q, want admitted", i, r.Code, r.Message)
				}
			}
			// Fast checks replicate in the background; either way the
			// counts must land, exactly.
			inproc.Eventually(t, 5*time.Second, "honest checks counted", func() error {
				if got := remaining(t, n, key, 100); got != 99 {
					return fmt.Errorf("key: remaining %d, want 99", got)
				}
				if got := remaining(t, n, bystander, 100); got != 97 {
					return fmt.Errorf("bystander: remaining %d, want 97", got)
				}
				return nil
			})
			if after := n.Node.Progress(other).Last; after != otherBefore {
				t.Errorf("shard %d's log grew from %d to %d: a check for another shard's key reached it", other, otherBefore, after)
			}
		})
	}
}

// A Forward call over the per-call cap is refused whole, before anything.
func TestForwardRefusesOversizedRequest(t *testing.T) {
	_, peer := forwardFixture(t)
	req := &peerv1.ForwardRequest{Checks: make([]*peerv1.ForwardCheck, 4097)}
	for i := range req.Checks {
		req.Checks[i] = &peerv1.ForwardCheck{Key: "k", Policy: logPolicy(10, policy.Strict), Cost: 1}
	}
	_, err := peer.Forward(context.Background(), req)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "checks") {
		t.Fatalf("got %v, want InvalidArgument naming checks", err)
	}
}

// Peer.ResetKey validates its key, shard and policy like Forward.
func TestPeerResetKeyValidates(t *testing.T) {
	n, peer := forwardFixture(t)
	shards := n.Node.Shards()
	key := "user:1"
	shard := uint32(hashing.ShardOf(key, shards))
	for _, tc := range []struct {
		req   *peerv1.PeerResetRequest
		field string
	}{
		{&peerv1.PeerResetRequest{Shard: shard, Key: "", Policy: logPolicy(10, policy.Strict)}, "key"},
		{&peerv1.PeerResetRequest{Shard: (shard + 1) % uint32(shards), Key: key, Policy: logPolicy(10, policy.Strict)}, "shard"},
		{&peerv1.PeerResetRequest{Shard: shard, Key: key, Policy: []byte{1, 2, 3}}, "policy"},
		{&peerv1.PeerResetRequest{Shard: shard, Key: key, Policy: logPolicy(20_000_000, policy.Strict)}, "policy.limits[0].limit.limit"},
	} {
		_, err := peer.ResetKey(context.Background(), tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("reset %v: got %v, want InvalidArgument naming %s", tc.req, err, tc.field)
		}
	}
}

// A forward's checks of one shard whose callers wait differently go to the
// group in groups of about the same wait, each bounded by its own: all are
// answered and counted as one group of them was, an atomic set whole
// whatever waits its checks carry.
func TestForwardChecksOfDifferentWaits(t *testing.T) {
	n, peer := forwardFixture(t)
	shards := n.Node.Shards()
	shard := hashing.ShardOf("\x00shop\x00", shards)
	p := logPolicy(100, policy.Strict)
	set := colocated("shop", policy.Strict)
	var plain []string // keys of the set's shard
	for i := 0; len(plain) < 2; i++ {
		if k := fmt.Sprintf("wait:%d", i); hashing.ShardOf(k, shards) == shard {
			plain = append(plain, k)
		}
	}
	req := &peerv1.ForwardRequest{Checks: []*peerv1.ForwardCheck{
		{Shard: uint32(shard), Key: "\x00shop\x00a", Policy: set, Cost: 1, WaitMs: 2000},
		{Shard: uint32(shard), Key: "\x00shop\x00b", Policy: set, Cost: 1, WaitMs: 20, Joined: true},
		{Shard: uint32(shard), Key: plain[0], Policy: p, Cost: 2, WaitMs: 1000},
		{Shard: uint32(shard), Key: plain[1], Policy: p, Cost: 3},
	}}
	resp, err := peer.Forward(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.Code != peerv1.ForwardResult_OK || !r.Decision.GetAllowed() {
			t.Errorf("check %d: %v %q, want admitted", i, r.Code, r.Message)
		}
	}
	if got := remaining(t, n, plain[0], 100); got != 98 {
		t.Errorf("%s: remaining %d, want 98", plain[0], got)
	}
}
