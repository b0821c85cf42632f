package window_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/window"
)

// A sliding log's ring follows what it holds: a key whose log once held
// 10,000 timestamps (one request of cost 10,000) and then a request every
// 59 minutes kept the 80 kB ring for as long as the trickle went on,
// against the README's 8 bytes per timestamp held.
func TestARingShrinksWithWhatItHolds(t *testing.T) {
	l := window.Limit{Algorithm: window.SlidingLog, Limit: 10_000, Window: int64(time.Hour)}
	var s window.State
	t0 := int64(1_700_000_000) * int64(time.Second)
	l.Record(&s, t0, 10_000)
	if hb := l.HeapBytes(&s); hb < 80_000 {
		t.Fatalf("10,000 timestamps in %d bytes", hb)
	}
	now := t0 + int64(59*time.Minute)
	l.Record(&s, now, 1)       // one more before they age out
	for i := 1; i <= 24; i++ { // then one every 59 minutes, for a day
		now += int64(59 * time.Minute)
		if d := l.Check(&s, now, 1); !d.Allowed {
			t.Fatalf("hour %d: denied: %+v", i, d)
		}
		l.Record(&s, now, 1)
		// Two timestamps at most are held (this one, and the one 59
		// minutes old): a ring of a few slots, not of thousands.
		if hb := l.HeapBytes(&s); hb > 128 {
			t.Fatalf("hour %d: two timestamps held in a %d-byte ring", i, hb)
		}
	}
	if d := l.Check(&s, now, 0); d.Remaining != 9_998 {
		t.Fatalf("remaining %d, want 9,998: shrinking lost or kept a timestamp", d.Remaining)
	}
}
