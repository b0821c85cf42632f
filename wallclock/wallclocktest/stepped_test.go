package wallclocktest

import (
	"testing"
	"time"
)

// A reading keeps the time the clock had at its instant; Off is the
// latest step.
func TestStepped(t *testing.T) {
	var c Stepped
	base := time.Now()
	at := func(d time.Duration) time.Time { return base.Add(d) }
	if c.Wall(base) != base.UnixNano() || c.Off() != 0 {
		t.Fatal("the zero clock is not in step")
	}
	c.Set(at(time.Second), time.Hour)
	c.Set(at(3*time.Second), -time.Minute)
	for _, tc := range []struct {
		at   time.Duration
		want time.Duration
	}{{0, 0}, {time.Second, time.Hour}, {2 * time.Second, time.Hour}, {3 * time.Second, -time.Minute}} {
		if got := time.Duration(c.Wall(at(tc.at)) - at(tc.at).UnixNano()); got != tc.want {
			t.Errorf("at +%v: %v off, want %v", tc.at, got, tc.want)
		}
	}
	if c.Off() != -time.Minute {
		t.Errorf("off %v now", c.Off())
	}
}
