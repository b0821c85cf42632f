package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// PeerServer.Forward answers each forwarded check alone: checkItem can
// refuse one check of a shard as not ready (CheckOwnerFresh: the group is
// not known here and the meta leader could not be reached; a later check
// of the same call may find it known, the meta state having caught up
// meanwhile) while the shard's other checks are submitted and counted.
// The sender must then not retry the whole request: decodeResults turned
// one NOT_LEADER into a NotLeaderError for all of the request's checks,
// which onLeader retries, counting twice the OK ones, and the ones written
// whose leadership was lost before their answer (UNAVAILABLE). Only a
// request none of whose checks was written goes again whole.
func TestDecodeMixedOKAndNotLeaderIsNotRetried(t *testing.T) {
	ok := forwardResult([]policy.Result{{Allowed: true, Remaining: 4}}, 0, nil)
	notReady := forwardResult(nil, 0, fmt.Errorf("%w: group 7 is not known here yet", cluster.ErrNotReady))
	lost := forwardResult(nil, 0, fmt.Errorf("shard-7: %w: %w", cluster.ErrUnavailable, raft.ErrLeadershipLost))
	moved := forwardResult(nil, 0, fmt.Errorf("%w: slot 9", cluster.ErrMoved))
	if notReady.Code != peerv1.ForwardResult_NOT_LEADER || lost.Code != peerv1.ForwardResult_UNAVAILABLE || moved.Code != peerv1.ForwardResult_MOVED {
		t.Fatalf("peer encodes a not-ready check as %v, a lost one as %v, a moved one as %v", notReady.Code, lost.Code, moved.Code)
	}
	for _, tc := range []struct {
		name  string
		rs    []*peerv1.ForwardResult
		retry bool
	}{
		{"counted, then not ready", []*peerv1.ForwardResult{ok, notReady}, false},
		{"not ready, then counted", []*peerv1.ForwardResult{notReady, ok}, false},
		{"not ready, then written and lost", []*peerv1.ForwardResult{notReady, lost}, false},
		{"written and lost, then not ready", []*peerv1.ForwardResult{lost, notReady}, false},
		{"not ready, moved", []*peerv1.ForwardResult{notReady, moved}, true},
		{"not ready alone", []*peerv1.ForwardResult{notReady, notReady}, true},
	} {
		_, err := decodeResults(7, tc.rs)
		if cluster.Retryable(err) != tc.retry {
			t.Errorf("%s: decoded as %v, retryable %v, want %v", tc.name, err, cluster.Retryable(err), tc.retry)
		}
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

// A check a peer refuses as invalid is named there by its place in the
// node-to-node call, which mixes several clients' checks: the client, whose
// answer sits at its own check's place, is told the field inside its check
// and not a place in a call it never saw.
func TestDecodeInvalidNamesTheFieldNotThePlaceInTheCall(t *testing.T) {
	p := &policy.Policy{Name: "p"}
	in := []*peerv1.ForwardCheck{{Shard: 1}, {Shard: 1}, {Shard: 2}, {Shard: 2, Joined: true}}
	checks := []fsm.Check{{Policy: p}, {Policy: p}, {Policy: p}, {Policy: p}}
	errs := make([]error, len(in))
	errs[1] = validate.AtField(validate.Elem("checks", 1)+"policy.", &window.FieldError{Field: "limits[0].window", Msg: "over the cap"})
	errs[3] = validate.AtField(validate.Elem("checks", 3), &window.FieldError{Field: "cost", Msg: "too much"})
	forwardSets(in, checks, errs)
	rs := make([]*peerv1.ForwardResult, len(in))
	for i, err := range errs {
		rs[i] = forwardResult([]policy.Result{{Allowed: true}}, 0, err)
	}
	_, err := decodeResults(1, rs)
	pe, ok := err.(*cluster.PartialError)
	if !ok {
		t.Fatalf("decoded as %v", err)
	}
	want := []string{"",
		"invalid request: refused by the shard leader: policy.limits[0].limit.window_ms: over the cap",
		"invalid request: refused by the shard leader: one atomic set: cost: too much",
		"invalid request: refused by the shard leader: one atomic set: cost: too much"}
	for i, w := range want {
		got := ""
		if pe.Errs[i] != nil {
			got = pe.Errs[i].Error()
		}
		if got != w {
			t.Errorf("check %d: %q, want %q", i, got, w)
		}
	}
	// A message that does not start with a place is relayed as it is.
	for _, m := range []string{"checks: too many", "checks[x].key: empty", "key: must not be empty"} {
		if got := relayedField(m); got != m {
			t.Errorf("relayedField(%q) = %q", m, got)
		}
	}
}

// A forwarded check whose outcome the leader does not know (its commit
// timed out, leadership was lost after the entry was written, raft shut
// down) crosses the node-to-node call as UNAVAILABLE, which the sender
// never sends again: NOT_LEADER would invite a retry that counts it twice.
// Only what was written nowhere is NOT_LEADER, with the leader's hint.
func TestForwardResultUnknownOutcomeIsNotRetried(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("shard-1: %w: %w", cluster.ErrUnavailable, context.DeadlineExceeded),
		fmt.Errorf("shard-1: %w: %w", cluster.ErrUnavailable, raft.ErrLeadershipLost),
		context.DeadlineExceeded,
		raft.ErrRaftShutdown,
	} {
		r := forwardResult(nil, 0, err)
		if r.Code != peerv1.ForwardResult_UNAVAILABLE {
			t.Errorf("%v: encoded as %v, want UNAVAILABLE", err, r.Code)
		}
		if _, derr := decodeResults(1, []*peerv1.ForwardResult{r}); cluster.Retryable(derr) {
			t.Errorf("%v: decodes to a retryable %v", err, derr)
		}
	}
	nl := &cluster.NotLeaderError{Group: "shard-1", LeaderID: "n2", LeaderAddr: "127.0.0.1:7002"}
	r := forwardResult(nil, 0, nl)
	if r.Code != peerv1.ForwardResult_NOT_LEADER || r.LeaderId != "n2" || r.LeaderAddr != "127.0.0.1:7002" {
		t.Errorf("not leader: encoded as %v", r)
	}
}

// A leader that decided a check of a forwarded call, lost the outcome of
// another and refused a third unwritten (a hand-over between them)
// answers each: the decided one keeps its answer, the unknown one is
// unknown alone, and the unwritten one may go again alone, not the call.
func TestDecodeUnknownOutcomeFailsAlone(t *testing.T) {
	rs := []*peerv1.ForwardResult{
		forwardResult([]policy.Result{{Allowed: true, Remaining: 4}}, 0, nil),
		forwardResult(nil, 0, fmt.Errorf("shard-1: %w: timed out", cluster.ErrUnavailable)),
		forwardResult(nil, 0, &cluster.NotLeaderError{Group: "shard-1"}),
	}
	res, err := decodeResults(1, rs)
	var pe *cluster.PartialError
	if !errors.As(err, &pe) || cluster.Retryable(err) {
		t.Fatalf("decoded as %v, %v: want each check's own answer, the call not retryable", res, err)
	}
	if pe.Errs[0] != nil || pe.Results[0].Remaining != 4 {
		t.Errorf("the decided check: %+v, %v", pe.Results[0], pe.Errs[0])
	}
	if !errors.Is(pe.Errs[1], cluster.ErrUnavailable) {
		t.Errorf("the unknown check: %v, want an unknown outcome", pe.Errs[1])
	}
	if !cluster.Retryable(pe.Errs[2]) {
		t.Errorf("the unwritten check: %v, want retryable alone", pe.Errs[2])
	}
}

// A forwarded check the leader refused behind its backlog comes back as
// that refusal (Unavailable, uncounted, said so), not as an unknown
// outcome; the leader's own message is kept.
func TestDecodeBacklogIsNotAnUnknownOutcome(t *testing.T) {
	r := forwardResult(nil, 0, fmt.Errorf("shard-2: %w: its deadline is 3ms away, a commit takes 20ms", cluster.ErrBacklog))
	if r.Code != peerv1.ForwardResult_BACKLOG || mayHaveCounted(r) {
		t.Fatalf("a leader encodes the refusal as %v", r.Code)
	}
	_, err := decodeResults(2, []*peerv1.ForwardResult{r})
	if !errors.Is(err, cluster.ErrBacklog) || errors.Is(err, cluster.ErrUnavailable) || cluster.Retryable(err) || codeOf(err) != codes.Unavailable {
		t.Fatalf("decoded as %v (%v)", err, codeOf(err))
	}
	if want := "shard-2: " + cluster.ErrBacklog.Error() + ": its deadline is 3ms away, a commit takes 20ms"; err.Error() != want {
		t.Errorf("message %q, want the leader's %q", err, want)
	}
}
