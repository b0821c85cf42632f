package client

import (
	"context"
	"math"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// An answer's times past the longest Duration (a broken node's) are the
// longest Duration, and negative ones 0: before, they wrapped, so a
// denial to be retried in 10^13 ms read as retry at once, and Wait asked
// again every millisecond instead of giving up at its deadline.
func TestDecisionTimesDoNotWrap(t *testing.T) {
	const inf = time.Duration(math.MaxInt64)
	const most = math.MaxInt64 / int64(time.Millisecond) // ms in the longest Duration
	for ms, want := range map[int64]time.Duration{
		0: 0, 1500: 1500 * time.Millisecond, -5: 0,
		most: time.Duration(most) * time.Millisecond, most + 1: inf, math.MaxInt64: inf,
	} {
		d := DecisionOf(&pb.AllowResponse{RetryAfterMs: ms, ResetAfterMs: ms, WindowMs: ms})
		if d.RetryAfter != want || d.ResetAfter != want || d.Window != want {
			t.Errorf("%d ms read as %v, %v, %v; want %v", ms, d.RetryAfter, d.ResetAfter, d.Window, want)
		}
	}
	asks := 0
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := waitN(ctx, func() (Decision, error) {
		asks++
		return DecisionOf(&pb.AllowResponse{RetryAfterMs: 1e13}), nil
	})
	if err == nil || asks != 1 {
		t.Errorf("Wait on a denial to be retried in 10^13 ms: %v after %d asks, want to give up after 1", err, asks)
	}
}
