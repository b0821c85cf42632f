package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
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
