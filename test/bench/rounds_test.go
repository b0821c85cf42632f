package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// rate is a result of n calls in one second.
func rate(n int64) *result {
	return &result{calls: n, decisions: n, elapsed: time.Second}
}

func TestMedianPicksTheMiddleSampleAndSpread(t *testing.T) {
	for _, tc := range []struct {
		keys         []float64
		mid, lo, hi  float64
		wantMidIndex int
	}{
		{keys: []float64{0.3}, mid: 0.3, lo: 0.3, hi: 0.3, wantMidIndex: 0},
		{keys: []float64{0.31, 0.22, 0.25}, mid: 0.25, lo: 0.22, hi: 0.31, wantMidIndex: 2},
		{keys: []float64{0.5, 0.1}, mid: 0.1, lo: 0.1, hi: 0.5, wantMidIndex: 1}, // even: the lower middle
		{keys: []float64{4, 1, 3, 2}, mid: 2, lo: 1, hi: 4, wantMidIndex: 3},
		{keys: []float64{2, 2, 1}, mid: 2, lo: 1, hi: 2, wantMidIndex: 0}, // ties keep their order
	} {
		samples := make([]sample, len(tc.keys))
		byRes := map[*result]int{}
		for i, k := range tc.keys {
			samples[i] = sample{res: rate(int64(k * 1000)), health: rate(1000)}
			byRes[samples[i].res] = i
		}
		key := func(s sample) float64 { return ratio(s.res.callsPerSec(), s.health.callsPerSec()) }
		mid, lo, hi := median(samples, key)
		if key(mid) != tc.mid || lo != tc.lo || hi != tc.hi {
			t.Errorf("keys %v: median %v in %v–%v, want %v in %v–%v", tc.keys, key(mid), lo, hi, tc.mid, tc.lo, tc.hi)
		}
		if got := byRes[mid.res]; got != tc.wantMidIndex {
			t.Errorf("keys %v: median is sample %d, want %d", tc.keys, got, tc.wantMidIndex)
		}
		if key(samples[0]) != tc.keys[0] {
			t.Errorf("keys %v: median reordered its argument", tc.keys)
		}
	}
}

// Each load's sample is paired with the health check of its own round, so
// a slow round's health check is what that round's loads are judged by.
func TestInRoundsPairsEachLoadWithItsRoundsHealth(t *testing.T) {
	var order []string
	healthRates := []int64{20_000, 10_000, 16_000}
	health := measurement{name: "health", run: func(round int) (*result, error) {
		order = append(order, "health")
		return rate(healthRates[round]), nil
	}}
	load := func(name string, n []int64) measurement {
		return measurement{name: name, run: func(round int) (*result, error) {
			order = append(order, name)
			return rate(n[round]), nil
		}}
	}
	healths, samples, errs, err := inRounds(io.Discard, 3, health, []measurement{
		load("a", []int64{5_000, 3_000, 4_000}),
		load("b", []int64{1, 2, 3}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, " "); got != "health a b health a b health a b" {
		t.Errorf("order %q: each round measures health and then every load", got)
	}
	if len(healths) != 3 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("healths %d, errs %v", len(healths), errs)
	}
	for i, s := range samples[0] {
		if s.health != healths[i] {
			t.Errorf("round %d: load a paired with the health of another round", i)
		}
	}
	// Against their own rounds' health checks: 0.25, 0.30, 0.25. Against
	// the first round's alone they would read 0.25, 0.15, 0.20.
	w := workload{name: "a", kind: strict}
	r, mid := w.judgeRounds("ghz", samples[0])
	if got := w.key(mid); got != 0.25 {
		t.Errorf("median ratio %v, want 0.25", got)
	}
	if !strings.Contains(r.figure, "3 rounds 0.25–0.30×") {
		t.Errorf("figure %q does not show the rounds' spread", r.figure)
	}
	if r.verdict != notMet {
		t.Errorf("verdict %v for 0.25× against ≥ 0.5×", r.verdict)
	}
}

func TestInRoundsStopsMeasuringAFailedLoad(t *testing.T) {
	calls := 0
	health := measurement{name: "health", run: func(int) (*result, error) { return rate(100), nil }}
	broken := measurement{name: "broken", run: func(round int) (*result, error) {
		calls++
		if round == 1 {
			return nil, errors.New("ghz died")
		}
		return rate(50), nil
	}}
	_, samples, errs, err := inRounds(io.Discard, 3, health, []measurement{broken})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] == nil || samples[0] != nil {
		t.Errorf("a load that failed in one round: err %v, samples %d; want its error and no figure", errs[0], len(samples[0]))
	}
	if calls != 2 {
		t.Errorf("the failed load ran %d times, want 2 (not again after it failed)", calls)
	}

	failing := measurement{name: "health", run: func(int) (*result, error) { return nil, errors.New("no node") }}
	if _, _, _, err := inRounds(io.Discard, 3, failing, []measurement{broken}); err == nil {
		t.Error("rounds without a health check went on")
	}
}

// A held-rate workload's figure is its p99: the median round is the one
// with the median p99, judged against the target alone.
func TestJudgeRoundsHeldRateUsesTheMedianP99(t *testing.T) {
	w := workload{name: "held", rps: 1000, kind: heldStrict}
	mk := func(p99 time.Duration) sample {
		r := rate(1000)
		r.p99 = p99
		return sample{res: r, health: rate(20_000)}
	}
	r, mid := w.judgeRounds("ghz", []sample{mk(30 * time.Millisecond), mk(4 * time.Millisecond), mk(3 * time.Millisecond)})
	if mid.res.p99 != 4*time.Millisecond {
		t.Errorf("median p99 %v, want 4ms", mid.res.p99)
	}
	if r.verdict != met {
		t.Errorf("verdict %v: a median p99 of 4 ms meets ≤ 5 ms", r.verdict)
	}
	if !strings.Contains(r.figure, "3 rounds p99 3.00 ms–30.0 ms") {
		t.Errorf("figure %q does not show the rounds' spread", r.figure)
	}
}

func TestMedianHealthShowsTheRoundsRange(t *testing.T) {
	mid, r := medianHealth("health", "ghz", []*result{rate(17_486), rate(21_868), rate(18_494)})
	if mid.callsPerSec() != 18_494 {
		t.Errorf("median health %v/s, want 18,494", mid.callsPerSec())
	}
	if !strings.Contains(r.figure, "3 rounds 17,486–21,868/s") {
		t.Errorf("figure %q", r.figure)
	}
	_, one := medianHealth("health", "ghz", []*result{rate(1)})
	if one.figure != "1× (reference)" {
		t.Errorf("one round: figure %q, want no spread", one.figure)
	}
}
