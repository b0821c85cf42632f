package window

import (
	"math"
	"testing"
	"time"
)

func TestCeilSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0}, {0, 0}, {1, 1}, {999 * time.Millisecond, 1}, {time.Second, 1},
		{time.Second + 1, 2}, {90 * time.Second, 90},
		{math.MaxInt64, math.MaxInt64/int64(time.Second) + 1}, // "never" stays positive
	} {
		if got := CeilSeconds(tc.d); got != tc.want {
			t.Errorf("CeilSeconds(%d) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
