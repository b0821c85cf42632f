package rpc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

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

// A check refused by a full group (--max-key-states) crosses the
// node-to-node call as FULL and comes back as cluster.ErrFull for that
// check alone, final, with the leader's message; a client sees
// ResourceExhausted, never a code that invites a retry.
func TestDecodeFullCheck(t *testing.T) {
	full := fmt.Errorf("shard-3: %w: the group holds --max-key-states (10) key states", cluster.ErrFull)
	rs := []*peerv1.ForwardResult{
		forwardResult([]policy.Result{{Allowed: true}}, 0, nil),
		forwardResult(nil, 0, full),
	}
	if rs[1].Code != peerv1.ForwardResult_FULL {
		t.Fatalf("peer encodes a full group's refusal as %v", rs[1].Code)
	}
	_, err := decodeResults(3, rs)
	pe, ok := err.(*cluster.PartialError)
	if !ok || pe.Errs[0] != nil || !errors.Is(pe.Errs[1], cluster.ErrFull) || cluster.Retryable(err) {
		t.Fatalf("decoded as %v", err)
	}
	if !strings.Contains(pe.Errs[1].Error(), "--max-key-states (10)") {
		t.Errorf("the leader's message is lost: %v", pe.Errs[1])
	}
	if c := codeOf(pe.Errs[1]); c != codes.ResourceExhausted {
		t.Errorf("a client would see %v", c)
	}
}
