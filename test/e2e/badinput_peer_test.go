package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

// rawCodec sends []byte as they are: how a test writes undecodable bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "raw" }

// encodedPolicy is a sliding log of limit per hour as a peer sends it.
func encodedPolicy(limit int64) []byte {
	p := policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: limit, Window: int64(time.Hour)}}}}
	return p.AppendBinary(nil)
}

// nodeIndex returns the index of the node with id.
func (f *badFixture) nodeIndex(t *testing.T, id string) int {
	t.Helper()
	for i, n := range f.c.Nodes {
		if n.ID == id {
			return i
		}
	}
	t.Fatalf("no node %q", id)
	return -1
}

func (f *badFixture) status(t *testing.T) *pb.StatusResponse {
	t.Helper()
	st, err := f.c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func peerCases(t *testing.T, f *badFixture) []grpcCase {
	leader := f.peer(f.nodeIndex(t, f.status(t).MetaLeader))
	other := f.peer((f.nodeIndex(t, f.status(t).MetaLeader) + 1) % len(f.c.Nodes))
	apply := func(cmd []byte) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := leader.ApplyMeta(ctx, &peerv1.ApplyMetaRequest{Command: cmd})
			return err
		}
	}
	report, _ := fsm.EncodeMeta(fsm.MetaShardReport, &metav1.ShardReport{Shard: 999, Leader: "n1", Term: 1})
	corrupt, _ := fsm.EncodeMeta(fsm.MetaSetPolicies, &metav1.SetPolicies{Policies: [][]byte{{0xff, 0x01}}})
	ghost, _ := fsm.EncodeMeta(fsm.MetaSetNodeState, &metav1.SetNodeState{Id: "bi-ghost", State: metav1.NodeState_NODE_STATE_LEAVING})
	// Commands the state machine would take: a report naming a stranger,
	// or a real leader at a made-up term (which would make the meta state
	// ignore every true report after it), a member record with unusable
	// addresses or state, a policy over the nodes' --max-log-length.
	stranger, _ := fsm.EncodeMeta(fsm.MetaShardReport, &metav1.ShardReport{Shard: 0, Leader: "bi-nobody", Term: 1 << 62,
		Replicas: []*metav1.Replica{{NodeId: "bi-nobody"}}})
	madeUpTerm, _ := fsm.EncodeMeta(fsm.MetaShardReport, &metav1.ShardReport{Shard: 0, Leader: f.status(t).ShardStatus[0].Leader, Term: 1 << 62,
		Replicas: []*metav1.Replica{{NodeId: f.status(t).ShardStatus[0].Leader}}})
	junkMember, _ := fsm.EncodeMeta(fsm.MetaUpsertNode, &metav1.UpsertNode{Node: &metav1.Node{Id: "bi-junk", GrpcAddr: "garbage", RaftAddr: "127.0.0.1:2", GossipAddr: "a:b:c"}})
	oddState, _ := fsm.EncodeMeta(fsm.MetaUpsertNode, &metav1.UpsertNode{Node: &metav1.Node{Id: "bi-junk", GrpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3", State: 9}})
	overCap := policy.Policy{Name: "bi-bigpeer", Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 5000, Window: int64(time.Hour)}}}}
	bigPolicy, _ := fsm.EncodeMeta(fsm.MetaSetPolicies, &metav1.SetPolicies{Policies: [][]byte{overCap.AppendBinary(nil)}})
	addNode := func(n *metav1.Node) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := other.AddNode(ctx, &peerv1.AddNodeRequest{Node: n})
			return err
		}
	}
	node := func(edit func(n *metav1.Node)) *metav1.Node {
		n := &metav1.Node{Id: "bi-new", GrpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3"}
		edit(n)
		return n
	}
	joinCluster := func(addrs ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := other.JoinCluster(ctx, &peerv1.JoinClusterRequest{Addrs: addrs})
			return err
		}
	}
	progress := func(req *peerv1.ShardProgressRequest) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := other.ShardProgress(ctx, req); return err }
	}
	var many []string
	for i := 0; i < 65; i++ {
		many = append(many, "127.0.0.1:1")
	}
	// Peer ResetKey goes to the leader of the key's shard.
	shard := hashing.ShardOf("bi-watch", f.shards)
	resetAt := f.peer(f.nodeIndex(t, f.status(t).ShardStatus[shard].Leader))
	reset := func(req *peerv1.PeerResetRequest) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := resetAt.ResetKey(ctx, req); return err }
	}
	raw := func(method string, b []byte) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			var out []byte
			return f.c.Nodes[0].Conn().Invoke(ctx, method, b, &out, grpc.ForceCodecV2(rawCodec{}))
		}
	}
	tooMany := make([]*peerv1.ForwardCheck, 4097)
	for i := range tooMany {
		tooMany[i] = &peerv1.ForwardCheck{Shard: uint32(shard), Key: "bi-watch", Policy: encodedPolicy(10)}
	}
	inv := codes.InvalidArgument
	return []grpcCase{
		{"ApplyMeta empty", apply(nil), inv, "command: empty"},
		{"ApplyMeta unknown type", apply([]byte{99}), inv, "command:"},
		{"ApplyMeta garbage body", apply([]byte{fsm.MetaInitCluster, 0xff, 0xff, 0xff}), inv, "command:"},
		{"ApplyMeta node without id", apply([]byte{fsm.MetaUpsertNode}), inv, "command:"},
		{"ApplyMeta shard out of range", apply(report), codes.FailedPrecondition, "shard 999"},
		{"ApplyMeta corrupt policy", apply(corrupt), inv, "policies[0]: corrupt policy encoding"},
		{"ApplyMeta unknown node", apply(ghost), codes.NotFound, "bi-ghost"},
		{"ApplyMeta report naming a stranger", apply(stranger), inv, "leader: bi-nobody is not a member"},
		{"ApplyMeta report at a made-up term", apply(madeUpTerm), inv, "term:"},
		{"ApplyMeta member with garbage addresses", apply(junkMember), inv, "node.grpc_addr:"},
		{"ApplyMeta member in an unknown state", apply(oddState), inv, "node.state:"},
		{"ApplyMeta policy over --max-log-length", apply(bigPolicy), inv, "policies[0].limits[0].limit.limit"},
		{"ShardProgress of a shard that does not exist", func(ctx context.Context) error {
			_, err := other.ShardProgress(ctx, &peerv1.ShardProgressRequest{Shard: 99})
			return err
		}, inv, "shard:"},
		{"ShardProgress move_slots without a move", progress(&peerv1.ShardProgressRequest{MoveSlots: []uint32{1}}), inv, "move: required with move_slots"},
		{"ShardProgress move without slots", progress(&peerv1.ShardProgressRequest{Move: 1}), inv, "move_slots: at least one"},
		{"ShardProgress move slots not ascending", progress(&peerv1.ShardProgressRequest{Move: 1, MoveSlots: []uint32{3, 2}}), inv, "move_slots[1]: slots must be ascending"},
		{"ShardProgress move of the meta group", progress(&peerv1.ShardProgressRequest{Meta: true, Move: 1, MoveSlots: []uint32{1}}), inv, "move: the meta group"},
		{"ExportSlots of a group that does not exist", func(ctx context.Context) error {
			_, err := other.ExportSlots(ctx, &peerv1.ExportSlotsRequest{Group: 0xffffffff, Move: 1, Slots: []uint32{0}})
			return err
		}, inv, "group:"},
		{"AddNode without node", addNode(nil), inv, "node: required"},
		{"AddNode empty id", addNode(node(func(n *metav1.Node) { n.Id = "" })), inv, "node.id: required"},
		{"AddNode 1 MiB id", addNode(node(func(n *metav1.Node) { n.Id = strings.Repeat("n", 1<<20) })), inv, "node.id:"},
		{"AddNode garbage raft address", addNode(node(func(n *metav1.Node) { n.RaftAddr = "garbage" })), inv, "node.raft_addr:"},
		{"AddNode no grpc address", addNode(node(func(n *metav1.Node) { n.GrpcAddr = "" })), inv, "node.grpc_addr:"},
		{"AddNode garbage gossip address", addNode(node(func(n *metav1.Node) { n.GossipAddr = "a:b:c" })), inv, "node.gossip_addr:"},
		{"AddNode short gossip key proof", func(ctx context.Context) error {
			_, err := other.AddNode(ctx, &peerv1.AddNodeRequest{Node: node(func(*metav1.Node) {}), GossipKey: &peerv1.GossipKeyProof{Mac: []byte{1, 2, 3}}})
			return err
		}, inv, "gossip_key.mac:"},
		{"AddNode with a gossip key the cluster has not", func(ctx context.Context) error {
			_, err := other.AddNode(ctx, &peerv1.AddNodeRequest{Node: node(func(*metav1.Node) {}), GossipKey: &peerv1.GossipKeyProof{Mac: make([]byte, 32)}})
			return err
		}, inv, "gossip_key:"},
		{"JoinCluster no addresses", joinCluster(), inv, "addrs:"},
		{"JoinCluster garbage address", joinCluster("127.0.0.1:7700", "garbage"), inv, "addrs[1]:"},
		{"JoinCluster 65 addresses", joinCluster(many...), inv, "addrs:"},
		{"JoinCluster on a member", joinCluster(f.c.Nodes[0].GRPC), codes.FailedPrecondition, "already"},
		{"ResetKey empty key", reset(&peerv1.PeerResetRequest{Shard: uint32(shard), Policy: encodedPolicy(10)}), inv, "key:"},
		{"ResetKey bad policy", reset(&peerv1.PeerResetRequest{Shard: uint32(shard), Key: "bi-watch", Policy: []byte{0xff}}), inv, "policy"},
		{"ResetKey wrong shard", reset(&peerv1.PeerResetRequest{Shard: uint32((shard + 1) % f.shards), Key: "bi-watch", Policy: encodedPolicy(10)}), inv, "shard:"},
		{"ExportGroup unknown group", func(ctx context.Context) error {
			_, err := resetAt.ExportGroup(ctx, &peerv1.ExportGroupRequest{Group: 999})
			return err
		}, inv, "group:"},
		{"RestoreGroup unknown group", func(ctx context.Context) error {
			_, err := resetAt.RestoreGroup(ctx, &peerv1.RestoreGroupRequest{Group: 999, States: []byte("FGSS")})
			return err
		}, inv, "group:"},
		{"RestoreGroup garbage states", func(ctx context.Context) error {
			_, err := resetAt.RestoreGroup(ctx, &peerv1.RestoreGroupRequest{Group: uint32(shard), States: []byte("garbage")})
			return err
		}, inv, "states:"},
		{"Forward 4097 checks", func(ctx context.Context) error {
			_, err := resetAt.Forward(ctx, &peerv1.ForwardRequest{Checks: tooMany})
			return err
		}, inv, "checks:"},
		{"undecodable AddNode", raw("/floodgate.peer.v1.Peer/AddNode", []byte{0x0a, 0x03, 0x0a, 0x05}), inv, "node"},
		{"undecodable Forward", raw("/floodgate.peer.v1.Peer/Forward", []byte{0x0a, 0x04, 0x12, 0x02, 0xc3, 0x28}), inv, "checks[0].key"},
	}
}

// forwardItems sends one Forward with a valid check among invalid ones:
// each invalid one fails alone, INVALID naming checks[i].<field>, and the
// valid one is counted; nothing else changes.
func (f *badFixture) forwardItems(t *testing.T) int {
	key := "bi-fwd-ok"
	shard := hashing.ShardOf(key, f.shards)
	to := f.peer(f.nodeIndex(t, f.status(t).ShardStatus[shard].Leader))
	otherShard := uint32((shard + 1) % f.shards)
	good := encodedPolicy(10)
	checks := []*peerv1.ForwardCheck{
		{Shard: uint32(shard), Key: key, Policy: good, Cost: 1},
		{Shard: uint32(shard), Key: key, Policy: []byte{0xff}, Cost: 1},
		{Shard: uint32(shard), Key: key, Policy: encodedPolicy(5000), Cost: 1},
		{Shard: uint32(shard), Key: key, Policy: good, Cost: -1},
		{Shard: uint32(shard), Key: key, Policy: good, Cost: 11},
		{Shard: uint32(shard), Key: "", Policy: good, Cost: 1},
		{Shard: uint32(shard), Key: strings.Repeat("k", 2048), Policy: good, Cost: 1}, // above any stored key (1,154 bytes with a hash tag)
		{Shard: otherShard, Key: key, Policy: good, Cost: 1},
		{Shard: 9999, Key: key, Policy: good, Cost: 1},
	}
	fields := []string{"", "policy", "policy.", "cost", "cost", "key", "key", "shard", "shard"}
	before := f.capture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := to.Forward(ctx, &peerv1.ForwardRequest{Checks: checks})
	if err != nil {
		t.Fatalf("Forward: %v (one bad item must not fail the others)", err)
	}
	if len(resp.Results) != len(checks) {
		t.Fatalf("%d results for %d checks", len(resp.Results), len(checks))
	}
	if r := resp.Results[0]; r.Code != peerv1.ForwardResult_OK || r.Decision.GetRemaining() != 9 {
		t.Errorf("valid check: %v", r)
	}
	for i := 1; i < len(checks); i++ {
		r := resp.Results[i]
		want := fmt.Sprintf("checks[%d].%s", i, fields[i])
		if r.Code != peerv1.ForwardResult_INVALID || !strings.Contains(r.Message, want) {
			t.Errorf("check %d: %s %q, want INVALID naming %s", i, r.Code, r.Message, want)
		}
	}
	after := f.capture(t)
	for _, n := range f.c.Nodes {
		delete(before.last, groupKey(n.ID, int(shard))) // the valid check was written there
	}
	f.unchanged(t, before, after)
	return len(checks) - 1
}
