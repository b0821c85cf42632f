package e2e

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// badShards keeps the cluster small: every input is followed by a read of
// every replica's log index.
const badShards = 4

// Bad input on every entry point of real processes gets a clear error that
// names the field and changes nothing: no Raft log entry on any replica,
// no policy, no count. The node stays up and keeps answering checks.
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, "--shards", "4", "--max-log-length", "1000")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := &pb.Policy{Name: "bi-api", KeyBy: []string{"user"}, Limits: []*pb.PolicyLimit{{Name: "hour", Limit: slidingLog(5, time.Hour)}}}
	soft := &pb.Policy{Name: "bi-soft", Mode: pb.Mode_MODE_SOFT, SoftPercent: 1000, Limits: []*pb.PolicyLimit{{Limit: slidingLog(50, time.Hour)}}}
	if _, err := c.Nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{api, soft}}); err != nil {
		t.Fatal(err)
	}
	inline := &pb.AllowRequest{Key: "bi-watch", Limit: slidingLog(10, time.Hour), Cost: cost(3)}
	named := &pb.AllowRequest{Policy: "bi-api", Descriptors: map[string]string{"user": "42"}, Cost: cost(2)}
	for _, req := range []*pb.AllowRequest{inline, named} {
		if _, err := c.Nodes[0].Limiter().Allow(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	f := &badFixture{c: c, shards: badShards, watch: []watched{
		{&pb.AllowRequest{Key: "bi-watch", Limit: slidingLog(10, time.Hour), Cost: cost(0)}, 7},
		{&pb.AllowRequest{Policy: "bi-api", Descriptors: map[string]string{"user": "42"}, Cost: cost(0)}, 3},
	}}
	f.countersUnchanged(t)

	n := 0
	t.Run("RateLimiter", func(t *testing.T) { n += f.runGRPCCases(t, limiterCases(c.Nodes[2])) })
	t.Run("Admin", func(t *testing.T) { n += f.runGRPCCases(t, adminCases(c.Nodes[1])) })
	t.Run("Peer", func(t *testing.T) { n += f.runGRPCCases(t, peerCases(t, f)) })
	t.Run("Forward", func(t *testing.T) { n += f.forwardItems(t) })
	t.Run("floodgatectl", func(t *testing.T) { n += f.ctlCases(t) })
	t.Run("Wire", func(t *testing.T) { n += f.wireCases(t) })
	t.Run("RLS", func(t *testing.T) { n += f.runGRPCCases(t, rlsCases(f)) })
	t.Run("HTTP", func(t *testing.T) { n += f.httpCases(t) })
	t.Logf("%d bad inputs", n)
	if n < 60 {
		t.Fatalf("only %d bad inputs", n)
	}
}

// limitWith is an hourly sliding log of 10, edited.
func limitWith(edit func(l *pb.Limit)) *pb.Limit {
	l := slidingLog(10, time.Hour)
	edit(l)
	return l
}

func limiterCases(node *Node) []grpcCase {
	rl := node.Limiter()
	hour := slidingLog(10, time.Hour)
	allow := func(req *pb.AllowRequest) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := rl.Allow(ctx, req); return err }
	}
	batch := func(reqs ...*pb.AllowRequest) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := rl.AllowBatch(ctx, &pb.AllowBatchRequest{Requests: reqs})
			return err
		}
	}
	raw := func(method string, b []byte) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			var out []byte
			return node.Conn().Invoke(ctx, method, b, &out, grpc.ForceCodecV2(rawCodec{}))
		}
	}
	mib := strings.Repeat("x", 1<<20)
	many := map[string]string{}
	for i := 0; i < 33; i++ {
		many[strings.Repeat("d", i+1)] = "v"
	}
	good := &pb.AllowRequest{Key: "bi-watch", Limit: hour, Cost: cost(1)}
	inv := codes.InvalidArgument
	return []grpcCase{
		{"empty key", allow(&pb.AllowRequest{Limit: hour}), inv, "key:"},
		{"key over 1024 bytes", allow(&pb.AllowRequest{Key: strings.Repeat("k", 1025), Limit: hour}), inv, "key: 1025 bytes"},
		{"1 MiB key", allow(&pb.AllowRequest{Key: mib, Limit: hour}), inv, "key:"},
		{"key starting with NUL (the hash tag's byte)", allow(&pb.AllowRequest{Key: "\x00shop\x00k", Limit: hour}), inv, "key: must not start with a NUL byte"},
		{"1 MiB descriptor name", allow(&pb.AllowRequest{Descriptors: map[string]string{mib: "1"}, Limit: hour}), inv, "descriptors: a name of 1048576 bytes"},
		{"1 MiB descriptor value", allow(&pb.AllowRequest{Descriptors: map[string]string{"user": mib}, Limit: hour}), inv, "descriptors.user:"},
		{"33 descriptors", allow(&pb.AllowRequest{Descriptors: many, Limit: hour}), inv, "descriptors: 33 given"},
		{"descriptor name with a space", allow(&pb.AllowRequest{Descriptors: map[string]string{"a b": "1"}, Limit: hour}), inv, "descriptors: name"},
		{"key and descriptors", allow(&pb.AllowRequest{Key: "k", Descriptors: map[string]string{"a": "1"}, Limit: hour}), inv, "descriptors:"},
		{"no limit", allow(&pb.AllowRequest{Key: "k"}), inv, "limit:"},
		{"zero limit", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) { l.Limit = 0 })}), inv, "limit.limit:"},
		{"negative limit", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) { l.Limit = -1 })}), inv, "limit.limit:"},
		{"huge limit", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) { l.Limit = math.MaxInt64 })}), inv, "limit.limit:"},
		{"log over --max-log-length", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) { l.Limit = 5000 })}), inv, "limit.limit:"},
		{"zero window", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) { l.WindowMs = 0 })}), inv, "limit.window_ms:"},
		{"window over a year", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) { l.WindowMs = math.MaxInt64 })}), inv, "limit.window_ms:"},
		{"unknown algorithm", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) { l.Algorithm = 99 })}), inv, "limit.algorithm:"},
		{"unknown calendar", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) { l.Calendar = 99 })}), inv, "limit.calendar:"},
		{"negative buckets", allow(&pb.AllowRequest{Key: "k", Limit: limitWith(func(l *pb.Limit) {
			l.Algorithm, l.Buckets = pb.Algorithm_SLIDING_COUNTER, -1
		})}), inv, "limit.buckets:"},
		{"negative cost", allow(&pb.AllowRequest{Key: "bi-watch", Limit: hour, Cost: cost(-1)}), inv, "cost:"},
		{"cost above capacity", allow(&pb.AllowRequest{Key: "bi-watch", Limit: hour, Cost: cost(11)}), inv, "cost:"},
		{"policy and limit", allow(&pb.AllowRequest{Key: "k", Policy: "bi-api", Limit: hour}), inv, "limit:"},
		{"unknown policy", allow(&pb.AllowRequest{Key: "k", Policy: "bi-nope"}), inv, "policy: unknown policy"},
		{"1 MiB policy name", allow(&pb.AllowRequest{Key: "k", Policy: mib}), inv, "policy: 1048576 bytes"},
		{"policy name with a slash", allow(&pb.AllowRequest{Key: "k", Policy: "a/b"}), inv, "policy:"},
		{"raw key on a key_by policy", allow(&pb.AllowRequest{Key: "user=42", Policy: "bi-api"}), inv, "key:"},
		{"missing descriptor", allow(&pb.AllowRequest{Policy: "bi-api", Descriptors: map[string]string{"ip": "1"}}), inv, "descriptors:"},
		{"extra descriptor", allow(&pb.AllowRequest{Policy: "bi-api", Descriptors: map[string]string{"user": "42", "ip": "1"}}), inv, "descriptors.ip:"},
		{"undecodable Allow", raw("/floodgate.v1.RateLimiter/Allow", []byte{0xff, 0xff, 0xff}), inv, "request:"},
		{"key not UTF-8", raw("/floodgate.v1.RateLimiter/Allow", []byte{0x0a, 0x02, 0xff, 0xfe}), inv, "key:"},
		{"batch of 1001", batch(make1001(good)...), inv, "requests: 1001 checks"},
		{"one bad item spoils the batch", batch(good, &pb.AllowRequest{Limit: hour}, good), inv, "requests[1].key:"},
		{"batch item with a 1 MiB descriptor name", batch(&pb.AllowRequest{Descriptors: map[string]string{mib: "1"}, Limit: hour}), inv, "requests[0].descriptors:"},
		{"undecodable AllowBatch", raw("/floodgate.v1.RateLimiter/AllowBatch", []byte{0x0a, 0x05, 0x0a, 0x02, 0xff, 0xfe, 0x00}), inv, "requests[0]"},
	}
}

func make1001(r *pb.AllowRequest) []*pb.AllowRequest {
	out := make([]*pb.AllowRequest, 1001)
	for i := range out {
		out[i] = r
	}
	return out
}

func adminCases(node *Node) []grpcCase {
	ad := node.Admin()
	mib := strings.Repeat("x", 1<<20)
	join := func(addr string) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := ad.Join(ctx, &pb.JoinRequest{NodeAddr: addr}); return err }
	}
	leave := func(id string) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := ad.Leave(ctx, &pb.LeaveRequest{NodeId: id}); return err }
	}
	set := func(ps ...*pb.Policy) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := ad.SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: ps})
			return err
		}
	}
	get := func(name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := ad.GetPolicy(ctx, &pb.GetPolicyRequest{Name: name})
			return err
		}
	}
	del := func(name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := ad.DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: name})
			return err
		}
	}
	reset := func(req *pb.ResetKeyRequest) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := ad.ResetKey(ctx, req); return err }
	}
	pol := func(name string, l *pb.Limit) *pb.Policy {
		return &pb.Policy{Name: name, Limits: []*pb.PolicyLimit{{Limit: l}}}
	}
	hour := slidingLog(10, time.Hour)
	var thousand []*pb.Policy
	for i := 0; i < 1001; i++ {
		thousand = append(thousand, pol("p", hour))
	}
	inv := codes.InvalidArgument
	return []grpcCase{
		{"Join without address", join(""), inv, "node_addr: required"},
		{"Join garbage address", join("garbage"), inv, `node_addr: "garbage" is not host:port`},
		{"Join port out of range", join("127.0.0.1:99999"), inv, "node_addr:"},
		{"Join host with a space", join("bad host:7700"), inv, "node_addr:"},
		{"Join 1 MiB address", join(mib), inv, "node_addr:"},
		{"Leave unknown node", leave("bi-ghost"), codes.NotFound, "node_id:"},
		{"Leave 1 MiB node id", leave(mib), inv, "node_id: 1048576 bytes"},
		{"Leave node id with a newline", leave("n1\n"), inv, "node_id:"},
		{"SetPolicies none", set(), inv, "policies:"},
		{"SetPolicies 1001", set(thousand...), inv, "policies: give 1 to 1000"},
		{"SetPolicies without name", set(pol("", hour)), inv, "policies[0].name:"},
		{"SetPolicies bad name", set(pol("bad name", hour)), inv, "policies[0].name:"},
		{"SetPolicies zero limit", set(pol("bi-x", limitWith(func(l *pb.Limit) { l.Limit = 0 }))), inv, "policies[0].limits[0].limit.limit:"},
		{"SetPolicies log over --max-log-length", set(pol("bi-x", limitWith(func(l *pb.Limit) { l.Limit = 5000 }))), inv, "policies[0].limits[0].limit.limit:"},
		{"SetPolicies unknown mode", set(&pb.Policy{Name: "bi-x", Mode: 42, Limits: []*pb.PolicyLimit{{Limit: hour}}}), inv, "policies[0].mode:"},
		{"SetPolicies duplicate names", set(pol("bi-x", hour), pol("bi-x", hour)), inv, "policies[1].name:"},
		{"SetPolicies one bad of two stores none", set(pol("bi-ok", hour), pol("bi-bad", nil)), inv, "policies[1].limits[0].limit"},
		{"GetPolicy without name", get(""), inv, "name: required"},
		{"GetPolicy unknown", get("bi-nope"), codes.NotFound, "name:"},
		{"GetPolicy 1 MiB name", get(mib), inv, "name: 1048576 bytes"},
		{"DeletePolicy without name", del(""), inv, "name: required"},
		{"DeletePolicy unknown", del("bi-nope"), codes.NotFound, "name:"},
		{"DeletePolicy bad name", del("a,b"), inv, "name:"},
		{"ResetKey empty key", reset(&pb.ResetKeyRequest{Limit: hour}), inv, "key:"},
		{"ResetKey no limit", reset(&pb.ResetKeyRequest{Key: "bi-watch"}), inv, "limit:"},
		{"ResetKey unknown policy", reset(&pb.ResetKeyRequest{Policy: "bi-nope", Descriptors: map[string]string{"user": "42"}}), inv, "policy:"},
		{"ResetKey 1 MiB descriptor name", reset(&pb.ResetKeyRequest{Policy: "bi-api", Descriptors: map[string]string{mib: "1"}}), inv, "descriptors:"},
	}
}
