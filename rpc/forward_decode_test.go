package rpc

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// PeerServer.Forward answers each forwarded check alone: checkItem can
// refuse one check of a shard as not ready (CheckOwnerFresh: the group is
// not known here and the meta leader could not be reached; a later check
// of the same call may find it known, the meta state having caught up
// meanwhile) while the shard's other checks are submitted and counted.
// The sender must then not retry the whole request: decodeResults turned
// one NOT_LEADER into a NotLeaderError for all of the request's checks,
// which onLeader retries, counting the OK ones twice.
func TestDecodeMixedOKAndNotLeaderIsNotRetried(t *testing.T) {
	rs := []*peerv1.ForwardResult{
		forwardResult([]policy.Result{{Allowed: true, Remaining: 4}}, 0, nil), // counted
		forwardResult(nil, 0, fmt.Errorf("%w: group 7 is not known here yet", cluster.ErrNotReady)),
	}
	if rs[1].Code != peerv1.ForwardResult_NOT_LEADER {
		t.Fatalf("peer encodes a not-ready check as %v", rs[1].Code)
	}
	_, err := decodeResults(7, rs)
	if cluster.Retryable(err) {
		t.Fatalf("a request one of whose checks was counted decodes to a retryable error: %v", err)
	}
}
