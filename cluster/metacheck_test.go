package cluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

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
		err := n.ApplyLocalMeta(tc.cmd)
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
	if err := n.ApplyLocalMeta(ok); err != nil {
		t.Fatal(err)
	}
}
