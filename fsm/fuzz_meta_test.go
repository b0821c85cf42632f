package fsm

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/test/fuzzseed"
)

// metaCommands are valid meta log entries of every type, in an order that
// builds a cluster: three nodes, a report, the sample policies.
func metaCommands() []fuzzseed.Seed {
	enc := func(typ byte, m proto.Message) []byte {
		b, err := EncodeMeta(typ, m)
		if err != nil {
			panic(err)
		}
		return b
	}
	var pols [][]byte
	for _, p := range fuzzseed.Policies() {
		if p.Name != "" {
			pols = append(pols, p.AppendBinary(nil))
		}
	}
	node := func(id string) *metav1.Node {
		return &metav1.Node{Id: id, GrpcAddr: id + ":7700", RaftAddr: id + ":7702", GossipAddr: id + ":7703", Region: "eu"}
	}
	report := &metav1.ShardReport{Shard: 1, Leader: "n1", Term: 3, Replicas: []*metav1.Replica{{NodeId: "n1", Voter: true}, {NodeId: "n2"}}}
	return []fuzzseed.Seed{
		{Name: "init", Data: enc(MetaInitCluster, &metav1.InitCluster{ClusterId: "c1", Shards: 8, Replicas: 3})},
		{Name: "upsert-n1", Data: enc(MetaUpsertNode, &metav1.UpsertNode{Node: node("n1")})},
		{Name: "upsert-n2", Data: enc(MetaUpsertNode, &metav1.UpsertNode{Node: node("n2")})},
		{Name: "upsert-n3-dead", Data: enc(MetaUpsertNode, &metav1.UpsertNode{Node: &metav1.Node{Id: "n3", State: metav1.NodeState_NODE_STATE_DEAD}})},
		{Name: "report", Data: enc(MetaShardReport, report)},
		{Name: "set-policies", Data: enc(MetaSetPolicies, &metav1.SetPolicies{Policies: pols})},
		{Name: "leave-n2", Data: enc(MetaSetNodeState, &metav1.SetNodeState{Id: "n2", State: metav1.NodeState_NODE_STATE_LEAVING})},
		{Name: "remove-n3", Data: enc(MetaRemoveNode, &metav1.RemoveNode{Id: "n3"})},
		{Name: "delete-policy", Data: enc(MetaDeletePolicy, &metav1.DeletePolicy{Name: "api"})},
		{Name: "report-out-of-range", Data: enc(MetaShardReport, &metav1.ShardReport{Shard: 1 << 20, Term: 1})},
		{Name: "set-policies-inline", Data: enc(MetaSetPolicies, &metav1.SetPolicies{Policies: [][]byte{fuzzseed.Policies()[0].AppendBinary(nil)}})},
		{Name: "set-policies-trailing", Data: enc(MetaSetPolicies, &metav1.SetPolicies{Policies: [][]byte{append(pols[0], 0)}})},
		{Name: "set-state-unknown-node", Data: enc(MetaSetNodeState, &metav1.SetNodeState{Id: "n9", State: metav1.NodeState_NODE_STATE_DEAD})},
		{Name: "init-other-cluster", Data: enc(MetaInitCluster, &metav1.InitCluster{ClusterId: "c2", Shards: 4, Replicas: 1})},
	}
}

// metaSeeds adds to metaCommands entries a node must refuse or stop on.
func metaSeeds() []fuzzseed.Seed {
	cmds := metaCommands()
	seeds := slices.Clone(cmds)
	// InitCluster's shard count, field 2, as large as the type allows.
	hugeInit := protowire.AppendTag([]byte{MetaInitCluster}, 1, protowire.BytesType)
	hugeInit = protowire.AppendString(hugeInit, "c1")
	hugeInit = protowire.AppendTag(hugeInit, 2, protowire.VarintType)
	hugeInit = protowire.AppendVarint(hugeInit, 1<<32-1)
	hugeInit = append(hugeInit, 3<<3, 1)
	seeds = append(seeds,
		fuzzseed.Seed{Name: "init-shards-max", Data: hugeInit},
		fuzzseed.Seed{Name: "type-0", Data: append([]byte{0}, cmds[0].Data[1:]...)},
		fuzzseed.Seed{Name: "type-8", Data: append([]byte{8}, cmds[1].Data[1:]...)},
		fuzzseed.Seed{Name: "type-255", Data: []byte{255}},
		fuzzseed.Seed{Name: "upsert-bad-proto", Data: []byte{MetaUpsertNode, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}},
	)
	seeds = append(seeds, fuzzseed.Truncations("report", cmds[4].Data, 2)...)
	return seeds
}

// seededMeta returns a meta state machine that applied metaCommands up to
// n.
func seededMeta(t testing.TB, n int) *Meta {
	m := NewMeta()
	for i, c := range metaCommands()[:n] {
		if err, _ := m.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c.Data}).(error); err != nil {
			t.Fatalf("seed %s: %v", c.Name, err)
		}
	}
	return m
}

// applyMetaFuzzed applies one entry; like applyFuzzed it lets through only
// the documented stops: on an unknown entry type, and on a known one that
// holds a part of a newer format (a policy's version or flag).
func applyMetaFuzzed(m *Meta, data []byte) (resp any, stopped bool) {
	defer func() {
		if r := recover(); r != nil {
			err, _ := r.(error)
			known := data[0] >= MetaInitCluster && data[0] <= MetaDeletePolicy
			if known && !newerFormat(err) || !errors.Is(err, ErrUnknownEntry) {
				panic(r)
			}
			stopped = true
		}
	}()
	return m.Apply(&raft.Log{Index: 100, Type: raft.LogCommand, Data: data}), false
}

// FuzzMetaApply applies any entry to an empty and to a built meta state.
// It must not panic (but for the documented stop on an unknown type),
// must allocate in proportion to the entry, must either refuse it leaving
// the state as it was or publish a valid state, and that state must
// snapshot and restore to the same bytes.
func FuzzMetaApply(f *testing.F) {
	fuzzseed.Add(f, metaSeeds())
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		for _, built := range []int{0, 6} {
			m := seededMeta(t, built)
			cur := m.View()
			fuzzseed.CheckAllocs(t, data, 1<<20, 256, func() { _, _ = applyMeta(cur, data[0], data[1:]) })
			resp, stopped := applyMetaFuzzed(m, data)
			if stopped {
				return
			}
			if resp != nil {
				if _, ok := resp.(error); !ok {
					t.Fatalf("apply answered %v", resp)
				}
				if m.View() != cur {
					t.Fatalf("refused entry (%v) changed the state", resp)
				}
				continue
			}
			v := m.View()
			if v.Index != 100 {
				t.Fatalf("applied entry left index %d", v.Index)
			}
			checkMetaView(t, v)
			checkMetaSnapshotRoundTrip(t, m)
		}
	})
}

// checkMetaView checks what every state Apply publishes satisfies.
func checkMetaView(t *testing.T, v *MetaView) {
	t.Helper()
	if len(v.Reports) != v.Shards {
		t.Fatalf("%d reports for %d shards", len(v.Reports), v.Shards)
	}
	for i, n := range v.Nodes {
		if n.Id == "" || i > 0 && v.Nodes[i-1].Id >= n.Id {
			t.Fatalf("nodes not sorted by distinct ids: %v", v.Nodes)
		}
	}
	for i, r := range v.Reports {
		if r != nil && int(r.Shard) != i {
			t.Fatalf("report of shard %d stored at %d", r.Shard, i)
		}
	}
	for name, p := range v.Policies {
		if p.Name != name || p.Validate(0) != nil && p.Validate(1<<62) != nil {
			t.Fatalf("stored policy %q: %+v", name, p)
		}
	}
}

// metaSnapshotBytes is what m's snapshot persists.
func metaSnapshotBytes(t testing.TB, m *Meta) []byte {
	t.Helper()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(snap.(metaSnapshot))
}

// checkMetaSnapshotRoundTrip restores m's snapshot on a fresh meta state,
// which must write it back byte for byte.
func checkMetaSnapshotRoundTrip(t *testing.T, m *Meta) {
	t.Helper()
	snap := metaSnapshotBytes(t, m)
	r := NewMeta()
	if err := r.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatalf("restoring a snapshot meta wrote: %v", err)
	}
	if again := metaSnapshotBytes(t, r); !bytes.Equal(again, snap) {
		t.Fatalf("restored meta snapshot re-encodes differently:\n%x\n%x", snap, again)
	}
}

// FuzzMetaRestore restores any meta snapshot. It must not panic, must
// allocate in proportion to the snapshot, must leave the state as it was
// when it refuses, and what it accepts must snapshot to a fixed point and
// keep applying commands.
func FuzzMetaRestore(f *testing.F) {
	full := metaSnapshotBytes(f, seededMeta(f, 9)) // every command that applies
	st := &metav1.State{ClusterId: "c1", Shards: 1<<32 - 1, Replicas: 3}
	huge, err := proto.Marshal(st)
	if err != nil {
		f.Fatal(err)
	}
	seeds := []fuzzseed.Seed{
		{Name: "built-cluster", Data: full},
		{Name: "empty-state", Data: metaSnapshotBytes(f, NewMeta())},
		{Name: "version-2", Data: append([]byte{2}, full[1:]...)},
		{Name: "empty", Data: nil},
		{Name: "shards-max", Data: append([]byte{metaVersion}, huge...)},
	}
	fuzzseed.Add(f, append(seeds, fuzzseed.Truncations("built", full, 5)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := seededMeta(t, 6)
		before := m.View()
		fuzzseed.CheckAllocs(t, data, 1<<20, 256, func() { _ = NewMeta().Restore(io.NopCloser(bytes.NewReader(data))) })
		if err := m.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			if m.View() != before {
				t.Fatalf("refused snapshot (%v) changed the state", err)
			}
			return
		}
		snap := metaSnapshotBytes(t, m)
		r := NewMeta()
		if err := r.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatalf("restoring a snapshot meta wrote: %v", err)
		}
		if again := metaSnapshotBytes(t, r); !bytes.Equal(again, snap) {
			t.Fatalf("meta snapshot is not a fixed point:\n%x\n%x", snap, again)
		}
		for i, c := range metaCommands() {
			if resp, _ := applyMetaFuzzed(m, c.Data); resp != nil {
				if _, ok := resp.(error); !ok {
					t.Fatalf("command %d answered %v", i, resp)
				}
			}
		}
	})
}
