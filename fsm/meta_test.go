package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/window"
)

func metaLog(t *testing.T, index uint64, typ byte, msg proto.Message) *raft.Log {
	t.Helper()
	b, err := EncodeMeta(typ, msg)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: b}
}

func applyMetaOK(t *testing.T, m *Meta, l *raft.Log) {
	t.Helper()
	if err, _ := m.Apply(l).(error); err != nil {
		t.Fatalf("entry %d: %v", l.Index, err)
	}
}

func TestMetaMembershipAndReports(t *testing.T) {
	m := NewMeta()
	changed := m.Changed()
	applyMetaOK(t, m, metaLog(t, 1, MetaInitCluster, &metav1.InitCluster{ClusterId: "c1", Shards: 4, Replicas: 3}))
	select {
	case <-changed:
	default:
		t.Fatal("no change notification")
	}
	// Creating the cluster again is a no-op; with another id it is refused.
	applyMetaOK(t, m, metaLog(t, 2, MetaInitCluster, &metav1.InitCluster{ClusterId: "c1", Shards: 9, Replicas: 1}))
	if err, _ := m.Apply(metaLog(t, 3, MetaInitCluster, &metav1.InitCluster{ClusterId: "c2", Shards: 4, Replicas: 3})).(error); !errors.Is(err, ErrRefused) {
		t.Fatalf("second cluster id: %v", err)
	}
	for i, id := range []string{"n2", "n1", "n3"} {
		applyMetaOK(t, m, metaLog(t, uint64(4+i), MetaUpsertNode, &metav1.UpsertNode{Node: &metav1.Node{Id: id, GrpcAddr: id + ":1"}}))
	}
	applyMetaOK(t, m, metaLog(t, 7, MetaSetNodeState, &metav1.SetNodeState{Id: "n2", State: metav1.NodeState_NODE_STATE_LEAVING}))
	// Re-adding a node keeps its state: a restart does not undo a leave.
	applyMetaOK(t, m, metaLog(t, 8, MetaUpsertNode, &metav1.UpsertNode{Node: &metav1.Node{Id: "n2", GrpcAddr: "n2:2"}}))
	v := m.View()
	if v.Shards != 4 || len(v.Nodes) != 3 || v.Nodes[0].Id != "n1" || v.Nodes[2].Id != "n3" {
		t.Fatalf("view %+v", v)
	}
	if n2 := v.Node("n2"); n2.State != metav1.NodeState_NODE_STATE_LEAVING || n2.GrpcAddr != "n2:2" {
		t.Fatalf("n2 = %v", n2)
	}
	if err, _ := m.Apply(metaLog(t, 9, MetaSetNodeState, &metav1.SetNodeState{Id: "nope"})).(error); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("unknown node: %v", err)
	}
	for _, st := range []metav1.NodeState{metav1.NodeState_NODE_STATE_UNSPECIFIED, 42} {
		if err, _ := m.Apply(metaLog(t, 9, MetaSetNodeState, &metav1.SetNodeState{Id: "n1", State: st})).(error); !errors.Is(err, ErrRefused) {
			t.Fatalf("node state %d: %v, want refused", st, err)
		}
	}
	applyMetaOK(t, m, metaLog(t, 10, MetaShardReport, &metav1.ShardReport{Shard: 2, Leader: "n1", Term: 5}))
	applyMetaOK(t, m, metaLog(t, 11, MetaShardReport, &metav1.ShardReport{Shard: 2, Leader: "n3", Term: 4}))
	if got := m.View().Reports[2].Leader; got != "n1" {
		t.Fatalf("a report from an older term replaced a newer one: leader %s", got)
	}
	if err, _ := m.Apply(metaLog(t, 12, MetaShardReport, &metav1.ShardReport{Shard: 4, Leader: "n1", Term: 5})).(error); !errors.Is(err, ErrRefused) {
		t.Fatalf("report for shard out of range: %v", err)
	}
	applyMetaOK(t, m, metaLog(t, 13, MetaRemoveNode, &metav1.RemoveNode{Id: "n2"}))
	if m.View().Node("n2") != nil || m.View().Index != 13 {
		t.Fatalf("after remove: %+v", m.View())
	}

	snap := snapshotBytes(t, m)
	r := NewMeta()
	if err := r.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), snap) {
		t.Fatal("restored meta state snapshots differently")
	}
	if r.View().Reports[2].Leader != "n1" || len(r.View().Nodes) != 2 {
		t.Fatalf("restored view %+v", r.View())
	}
}

// Seen follows every command, refused ones included, and survives a
// snapshot: readers wait on it to know the view is caught up.
func TestMetaSeen(t *testing.T) {
	m := NewMeta()
	applyMetaOK(t, m, metaLog(t, 3, MetaInitCluster, &metav1.InitCluster{ClusterId: "c1", Shards: 4, Replicas: 1}))
	if m.Seen() != 3 {
		t.Fatalf("seen %d after entry 3", m.Seen())
	}
	if err, _ := m.Apply(metaLog(t, 5, MetaSetNodeState, &metav1.SetNodeState{Id: "ghost"})).(error); err == nil {
		t.Fatal("state of an unknown node accepted")
	}
	if m.Seen() != 5 {
		t.Fatalf("seen %d after a refused entry 5, want 5", m.Seen())
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf memSink
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	restored := NewMeta()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if restored.Seen() != 5 {
		t.Fatalf("seen %d after restore, want 5", restored.Seen())
	}
}

// Colocation is fixed when a policy is created: a change would move every
// count of the policy, so it is refused and nothing changes.
func TestMetaColocateIsFixed(t *testing.T) {
	m := NewMeta()
	applyMetaOK(t, m, metaLog(t, 1, MetaInitCluster, &metav1.InitCluster{ClusterId: "c1", Shards: 4, Replicas: 3}))
	set := func(index uint64, colocate bool, limit int64) error {
		p := &policy.Policy{Name: "shop", Colocate: colocate, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: limit, Window: 60e9}}}}
		err, _ := m.Apply(metaLog(t, index, MetaSetPolicies, &metav1.SetPolicies{Policies: [][]byte{p.AppendBinary(nil)}})).(error)
		return err
	}
	if err := set(2, true, 5); err != nil {
		t.Fatal(err)
	}
	if err := set(3, true, 9); err != nil {
		t.Fatalf("changing a colocated policy's limits: %v", err)
	}
	err := set(4, false, 9)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "policies[0].colocate") {
		t.Fatalf("dropping colocate: %v", err)
	}
	if p := m.View().Policy("shop"); p == nil || !p.Colocate || p.Limits[0].Limit.Limit != 9 {
		t.Fatalf("after the refusal: %+v", p)
	}
}

// The view's MaxLogLength is the least cap its members told (a member of
// an older release tells none), following joins, restarts and removals.
func TestMetaViewMaxLogLength(t *testing.T) {
	m := NewMeta()
	applyMetaOK(t, m, metaLog(t, 1, MetaInitCluster, &metav1.InitCluster{ClusterId: "c1", Shards: 4, Replicas: 3}))
	i := uint64(2)
	upsert := func(id string, cap int64) {
		applyMetaOK(t, m, metaLog(t, i, MetaUpsertNode, &metav1.UpsertNode{Node: &metav1.Node{Id: id, GrpcAddr: id + ":1", MaxLogLength: cap}}))
		i++
	}
	for _, step := range []struct {
		do   func()
		want int64
		of   string
	}{
		{func() { upsert("n1", 0) }, 0, ""},
		{func() { upsert("n2", 50_000) }, 50_000, "n2"},
		{func() { upsert("n3", 10_000) }, 10_000, "n3"},
		{func() { upsert("n3", 30_000) }, 30_000, "n3"}, // restarted with another cap
		{func() {
			applyMetaOK(t, m, metaLog(t, i, MetaRemoveNode, &metav1.RemoveNode{Id: "n3"}))
			i++
		}, 50_000, "n2"},
	} {
		step.do()
		if got, of := m.View().MaxLogLength, m.View().MaxLogLengthOf; got != step.want || of != step.of {
			t.Fatalf("after command %d: MaxLogLength %d of %q, want %d of %q", i-1, got, of, step.want, step.of)
		}
	}
}
