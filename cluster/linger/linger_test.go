package linger

import (
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func TestWait(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name       string
		setup      func(p *Policy)
		queued     int
		wantTarget int
		wantUntil  time.Time
	}{
		{"nothing seen yet", func(p *Policy) {}, 1, 1, time.Time{}},
		{"small batches: light load", func(p *Policy) {
			p.Sent(2, 3, t0)
			p.Answered(t0, t0.Add(2*ms))
		}, 1, 1, time.Time{}},
		{"a cohort is coming back", func(p *Policy) {
			p.Sent(10, 10, t0)                     // first batch: 10 in circulation
			p.Answered(t0, t0.Add(3*ms))           // took 3ms
			p.Sent(9, 9, t0.Add(3*ms))             // the other cohort went at once: 9 + 10 seen
			p.Answered(t0.Add(3*ms), t0.Add(6*ms)) // took 3ms
		}, 4, 15, t0.Add(9 * ms)},
		{"enough queued already", func(p *Policy) {
			p.Sent(10, 10, t0)
			p.Answered(t0, t0.Add(3*ms))
		}, 8, 8, time.Time{}},
		{"a slow entry waits no more than MaxWait", func(p *Policy) {
			p.Sent(20, 20, t0)
			p.Answered(t0, t0.Add(time.Second))
		}, 1, 16, t0.Add(time.Second + MaxWait)},
	} {
		var p Policy
		c.setup(&p)
		target, until := p.Wait(c.queued)
		if target != c.wantTarget || !until.Equal(c.wantUntil) {
			t.Errorf("%s: Wait(%d) = %d, %v; want %d, %v", c.name, c.queued, target, until, c.wantTarget, c.wantUntil)
		}
	}
}

// The estimate of the checks in circulation follows the load down, and
// after a quiet spell nothing waits: the wait ends when the last batch's
// callers would have been back.
func TestDemandFallsAndQuietSpellsWaitNothing(t *testing.T) {
	var p Policy
	now := t0
	p.Sent(20, 20, now)
	for range 30 {
		p.Answered(now, now.Add(time.Millisecond))
		now = now.Add(time.Millisecond)
		p.Sent(5, 5, now)
	}
	if target, _ := p.Wait(0); target > 10*share {
		t.Errorf("after 30 batches of 5 (10 in circulation) the target is %d", target)
	}
	p.Answered(now, now.Add(time.Millisecond))
	quiet := now.Add(time.Second)
	if _, until := p.Wait(1); !until.IsZero() && until.After(quiet) {
		t.Errorf("a lone check after a quiet second waits until %v", until.Sub(quiet))
	}
}
