package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// Retryable is the one rule of what may be sent again: only what was
// written nowhere, never an unknown outcome, whatever it wraps.
func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&NotLeaderError{Group: "shard-1", LeaderID: "n2", LeaderAddr: "a:1"}, true},
		{fmt.Errorf("shard-1: %w", ErrNoLeader), true},
		{fmt.Errorf("%w: starting", ErrNotReady), true},
		{fmt.Errorf("shard-1: %w: %w", ErrUnavailable, context.DeadlineExceeded), false},
		// A partly counted call wraps its not-leader cause: still unknown.
		{fmt.Errorf("shard-1: %w: %w", ErrUnavailable, &NotLeaderError{Group: "shard-1"}), false},
		{fmt.Errorf("%w: shard: 3", ErrWrongShard), false},
		{errors.New("disk on fire"), false},
		{context.Canceled, false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Every error hashicorp/raft gives for a failed Apply is classified by
// whether the entry may be in the log: only the three that mean it never
// reached it may be sent again. ErrLeadershipLost is the one to watch: the
// old leader had written the entry, and a follower may still commit it, so
// a retry could count the check twice.
func TestRaftErrorsRetriedOnlyWhenNeverAppended(t *testing.T) {
	b := &batcher{group: "shard-1", notLeader: func() error { return &NotLeaderError{Group: "shard-1", LeaderID: "n2"} }}
	for _, tc := range []struct {
		err      error
		appended bool // may be in the log
	}{
		{raft.ErrNotLeader, false},
		{raft.ErrEnqueueTimeout, false},
		{raft.ErrLeadershipTransferInProgress, false},
		{raft.ErrLeadershipLost, true},
		{raft.ErrRaftShutdown, true},
		{raft.ErrAbortedByRestore, true},
		{fmt.Errorf("commit: %w", context.DeadlineExceeded), true},
		{errors.New("disk on fire"), true},
	} {
		if got := notAppended(tc.err); got == tc.appended {
			t.Errorf("notAppended(%v) = %v, want %v", tc.err, got, !tc.appended)
		}
		if got := Retryable(b.classify(tc.err)); got == tc.appended {
			t.Errorf("classify(%v) = %v: retryable %v, want %v", tc.err, b.classify(tc.err), got, !tc.appended)
		}
	}
}
