package cluster

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// A meta command a peer sends that the state machine would refuse is
// refused before it is logged: the meta log does not move.
func TestApplyLocalMetaRefusesBeforeLogging(t *testing.T) {
	n := startOne(t)
	enc := func(typ byte, body []byte) []byte { return append([]byte{typ}, body...) }
	report, _ := fsm.EncodeMeta(fsm.MetaShardReport, &metav1.ShardReport{Shard: 999, Leader: "n1", Term: 1})
	corruptPolicy, _ := fsm.EncodeMeta(fsm.MetaSetPolicies, &metav1.SetPolicies{Policies: [][]byte{{0xff, 0x01}}})
	unknownNode, _ := fsm.EncodeMeta(fsm.MetaSetNodeState, &metav1.SetNodeState{Id: "ghost", State: metav1.NodeState_NODE_STATE_LEAVING})
	for _, tc := range []struct {
		name string
		cmd  []byte
		want error
		text string
	}{
		{"empty", nil, ErrConfig, "command: empty"},
		{"unknown type", enc(99, nil), ErrConfig, "command:"},
		{"garbage body", enc(fsm.MetaInitCluster, []byte{0xff, 0xff, 0xff}), ErrConfig, "command:"},
		{"node without id", enc(fsm.MetaUpsertNode, nil), ErrConfig, "command:"},
		{"shard out of range", report, fsm.ErrRefused, "no group or shard 999"},
		{"corrupt policy", corruptPolicy, fsm.ErrRefused, "policies[0]"},
		{"unknown node", unknownNode, fsm.ErrUnknownNode, "ghost"},
	} {
		before := n.metaGroup().raft.LastIndex()
		err := n.ApplyLocalMeta(context.Background(), tc.cmd)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v naming %q", tc.name, err, tc.want, tc.text)
		}
		// The node's own reconciler may log meanwhile: what matters is
		// that the refused command is not among the new entries.
		for i := before + 1; i <= n.metaGroup().raft.LastIndex(); i++ {
			var l raft.Log
			if err := n.metaGroup().store.logs.GetLog(i, &l); err == nil && l.Type == raft.LogCommand && bytes.Equal(l.Data, tc.cmd) {
				t.Errorf("%s: the refused command was logged at %d", tc.name, i)
			}
		}
	}
	// A sound command still goes through.
	ok, _ := fsm.EncodeMeta(fsm.MetaDeletePolicy, &metav1.DeletePolicy{Name: "none"})
	if err := n.ApplyLocalMeta(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
}

// A meta command a peer sends that names what the meta state does not
// hold, or a leadership its named leader does not confirm, is refused with
// the field named, and not logged: the state machine would take it.
func TestApplyLocalMetaRefusesWhatThePeerCannotVouchFor(t *testing.T) {
	n := startOneWith(t, func(c *Config) { c.Shards, c.Slots = 0, 64 })
	ctx := context.Background()
	enc := func(typ byte, m proto.Message) []byte {
		b, err := fsm.EncodeMeta(typ, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	self := n.self()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.replica(0).group.waitLeader(wctx); err != nil {
		t.Fatal(err)
	}
	term := n.Progress(0).Term
	replicas := []*metav1.Replica{{NodeId: "n1", Voter: true}}
	ghostNode := proto.Clone(self).(*metav1.Node)
	ghostNode.Id, ghostNode.GrpcAddr, ghostNode.GossipAddr = "qa-ghost", "garbage", "a:b:c"
	badState := proto.Clone(self).(*metav1.Node)
	badState.State = 9
	otherDir := proto.Clone(self).(*metav1.Node)
	otherDir.Incarnation = strings.Repeat("e", 32)
	for _, tc := range []struct {
		name string
		cmd  []byte
		text string
	}{
		{"report naming a stranger", enc(fsm.MetaShardReport, &metav1.ShardReport{Shard: 0, Leader: "nobody", Term: 1 << 62, Replicas: []*metav1.Replica{{NodeId: "nobody"}}}), "leader: nobody is not a member"},
		{"report with a made-up term", enc(fsm.MetaShardReport, &metav1.ShardReport{Shard: 0, Leader: "n1", Term: 1 << 62, Replicas: replicas}), "term:"},
		{"report with made-up replicas", enc(fsm.MetaShardReport, &metav1.ShardReport{Shard: 0, Leader: "n1", Term: term, Replicas: []*metav1.Replica{{NodeId: "n1"}, {NodeId: "n9"}}}), "replicas:"},
		{"report with a bad replica id", enc(fsm.MetaShardReport, &metav1.ShardReport{Shard: 0, Leader: "n1", Term: term, Replicas: []*metav1.Replica{{NodeId: "a b"}}}), "replicas[0].node_id"},
		{"node with bad addresses", enc(fsm.MetaUpsertNode, &metav1.UpsertNode{Node: ghostNode}), "node.grpc_addr"},
		{"node in an unknown state", enc(fsm.MetaUpsertNode, &metav1.UpsertNode{Node: badState}), "node.state"},
		{"a member's record from another data dir", enc(fsm.MetaUpsertNode, &metav1.UpsertNode{Node: otherDir}), "node.incarnation"},
		{"group homed at a stranger", enc(fsm.MetaAddGroup, &metav1.AddGroup{Home: "nobody"}), "home: nobody is not a member"},
		{"group rehomed at a stranger", enc(fsm.MetaRehomeGroup, &metav1.RehomeGroup{Group: 0, Home: "nobody"}), "home: nobody is not a member"},
	} {
		before := n.View().Index
		err := n.ApplyLocalMeta(ctx, tc.cmd)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want an invalid command naming %q", tc.name, err, tc.text)
		}
		for i := before + 1; i <= n.metaGroup().raft.LastIndex(); i++ {
			var l raft.Log
			if err := n.metaGroup().store.logs.GetLog(i, &l); err == nil && l.Type == raft.LogCommand && bytes.Equal(l.Data, tc.cmd) {
				t.Errorf("%s: the refused command was logged at %d", tc.name, i)
			}
		}
	}
	// The true report, and a node's own record, still go through.
	if err := n.ApplyLocalMeta(ctx, enc(fsm.MetaShardReport, &metav1.ShardReport{Shard: 0, Leader: "n1", Term: term, Replicas: replicas, Ready: true})); err != nil {
		t.Fatalf("a true report: %v", err)
	}
	if err := n.ApplyLocalMeta(ctx, enc(fsm.MetaUpsertNode, &metav1.UpsertNode{Node: self})); err != nil {
		t.Fatalf("the node's own record: %v", err)
	}
	if rep := n.View().Reports[0]; rep.Term != term || rep.Leader != "n1" {
		t.Fatalf("report after: %v", rep)
	}
}
