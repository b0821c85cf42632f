package clockcheck

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// sample is a peer whose clock is off ahead of ours, answering after rtt.
func sample(off, rtt time.Duration) Sample {
	return Sample{Sent: t0, Received: t0.Add(rtt), Remote: t0.Add(rtt / 2).Add(off)}
}

func TestOffset(t *testing.T) {
	for _, c := range []struct {
		s        Sample
		off, unc time.Duration
	}{
		{sample(0, 2*time.Millisecond), 0, time.Millisecond},
		{sample(3*time.Second, 10*time.Millisecond), 3 * time.Second, 5 * time.Millisecond},
		{sample(-time.Second, 0), -time.Second, 0},
		// A reply that came back "before" it was sent (a step of this
		// node's wall clock): no negative uncertainty.
		{Sample{Sent: t0, Received: t0.Add(-time.Millisecond), Remote: t0}, 0, 0},
	} {
		off, unc := c.s.Offset()
		if off != c.off || unc != c.unc {
			t.Errorf("%+v: offset %s ± %s, want %s ± %s", c.s, off, unc, c.off, c.unc)
		}
	}
}

func TestJudge(t *testing.T) {
	max := 500 * time.Millisecond
	ms := time.Millisecond
	for _, c := range []struct {
		name     string
		samples  []Sample
		peers    int // 0: as many as samples
		agree    int
		disagree int
		median   time.Duration
		outlier  bool
		inStep   bool // the node's stamps may follow its clock (wallclock.Guard)
	}{
		{"alone", nil, 0, 1, 0, 0, false, true},
		{"in step", []Sample{sample(3*ms, ms), sample(-2*ms, ms)}, 0, 3, 0, ms / 2, false, true},
		{"this node behind both peers", []Sample{sample(2*time.Second, ms), sample(2*time.Second+5*ms, ms)}, 0, 1, 2, 2*time.Second + 2500*time.Microsecond, true, false},
		{"this node ahead of both peers", []Sample{sample(-time.Hour, ms), sample(-time.Hour, ms)}, 0, 1, 2, -time.Hour, true, false},
		{"one peer off: it is the outlier, not us", []Sample{sample(2*time.Second, ms), sample(ms, ms)}, 0, 2, 1, time.Second + ms/2, false, true},
		{"two nodes apart: a tie", []Sample{sample(2*time.Second, ms)}, 0, 1, 1, 2 * time.Second, false, false},
		{"just inside the bound", []Sample{sample(max, 0), sample(max, 0)}, 0, 3, 0, max, false, true},
		{"beyond the bound only within the round trip's uncertainty", []Sample{sample(600*ms, 300*ms), sample(-600*ms, 300*ms)}, 0, 3, 0, 0, false, false},
		{"four of five peers off", []Sample{sample(time.Second, ms), sample(time.Second, ms), sample(time.Second, ms), sample(time.Second, ms), sample(0, ms)}, 0, 2, 4, time.Second, true, false},
		{"two of four peers off", []Sample{sample(time.Second, ms), sample(time.Second, ms), sample(0, ms), sample(0, ms)}, 0, 3, 2, time.Second / 2, false, true},
		// A rolling upgrade or a partition: this node reaches only the two
		// skewed nodes of five; the two it cannot read count for it.
		{"two of four peers off, two unmeasured", []Sample{sample(2*time.Second, ms), sample(2*time.Second, ms)}, 4, 1, 2, 2 * time.Second, false, false},
		// Peers that do not answer count against a step, not for it.
		{"two peers, neither answered", nil, 2, 1, 0, 0, false, false},
		{"three of four peers off, one unmeasured", []Sample{sample(2*time.Second, ms), sample(2*time.Second, ms), sample(2*time.Second, ms)}, 4, 1, 3, 2 * time.Second, true, false},
	} {
		peers := c.peers
		if peers == 0 {
			peers = len(c.samples)
		}
		v := Judge(c.samples, peers, max)
		if v.Agree != c.agree || v.Disagree != c.disagree || v.Median != c.median || v.Outlier() != c.outlier || v.InStep() != c.inStep {
			t.Errorf("%s: %+v outlier=%v in step=%v, want agree %d disagree %d median %s outlier=%v in step=%v", c.name, v, v.Outlier(), v.InStep(), c.agree, c.disagree, c.median, c.outlier, c.inStep)
		}
	}
}
