package wallclock

import (
	"testing"
	"time"
)

// Now is the system clock plus Skew, to within the time between the calls,
// and measures durations as time.Now does.
func TestNow(t *testing.T) {
	before := time.Now()
	got := Now()
	after := time.Now()
	if got.Before(before.Add(Skew())) || got.After(after.Add(Skew())) {
		t.Fatalf("Now %v, want between %v and %v plus skew %v", got, before, after, Skew())
	}
	if d := From(before).Sub(before); d != Skew() {
		t.Fatalf("From is %v off, want the skew %v", d, Skew())
	}
	a := Now()
	time.Sleep(time.Millisecond)
	if d := Now().Sub(a); d < time.Millisecond || d > time.Second {
		t.Fatalf("a millisecond's sleep measured %v", d)
	}
}
