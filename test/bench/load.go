package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// op is one call of a Go-side workload: i is the caller's index, r its own
// random source; it returns the decisions the call made (1 for a single
// check, the items answered for a batch) and the call's error.
type op func(i int, r *rand.Rand) (int, error)

// result is one measured workload, from either client (ghz or Go).
type result struct {
	calls, decisions, errors int64
	elapsed                  time.Duration
	p50, p99                 time.Duration
	firstErr                 string
}

func (r *result) callsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.calls-r.errors) / r.elapsed.Seconds()
}

func (r *result) decisionsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.decisions) / r.elapsed.Seconds()
}

// errorShare is the fraction of calls that failed.
func (r *result) errorShare() float64 {
	if r.calls == 0 {
		return 1
	}
	return float64(r.errors) / float64(r.calls)
}

// String is the one-line progress form of a result.
func (r *result) String() string {
	s := fmt.Sprintf("%9.0f calls/s %10.0f decisions/s  p50 %-9s p99 %-9s", r.callsPerSec(), r.decisionsPerSec(),
		fmtDur(r.p50), fmtDur(r.p99))
	if r.errors > 0 {
		s += fmt.Sprintf("  (%d errors, first: %s)", r.errors, r.firstErr)
	}
	return s
}

// tally collects the calls of one workload from all its callers.
type tally struct {
	mu   sync.Mutex
	res  result
	hist *hdrhistogram.Histogram
}

func newTally() *tally { return &tally{hist: newHist()} }

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(30*time.Second), 3) }

// caller is one goroutine's counts and latencies, merged into the tally
// when it is done.
type caller struct {
	hist                   *hdrhistogram.Histogram
	calls, decisions, errs int64
	firstErr               error
}

func newCaller() *caller { return &caller{hist: newHist()} }

// record counts one measured call started at t0 that made n decisions.
func (c *caller) record(t0 time.Time, n int, err error) {
	c.calls++
	if err != nil {
		c.errs++
		if c.firstErr == nil {
			c.firstErr = err
		}
		return
	}
	c.decisions += int64(n)
	_ = c.hist.RecordValue(int64(time.Since(t0)))
}

// add merges one caller's counts and latencies.
func (t *tally) add(c *caller) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.res.calls += c.calls
	t.res.decisions += c.decisions
	t.res.errors += c.errs
	if t.res.firstErr == "" && c.firstErr != nil {
		t.res.firstErr = c.firstErr.Error()
	}
	t.hist.Merge(c.hist)
}

// done returns the result of a workload measured for elapsed.
func (t *tally) done(elapsed time.Duration) *result {
	r := t.res
	r.elapsed = elapsed
	r.p50 = time.Duration(t.hist.ValueAtQuantile(50))
	r.p99 = time.Duration(t.hist.ValueAtQuantile(99))
	return &r
}

// measure runs o from clients goroutines as fast as each gets answers
// (closed loop): first for warmup, unmeasured, then for duration,
// recording every call's latency.
func measure(clients int, duration, warmup time.Duration, o op) *result {
	t := newTally()
	var wg sync.WaitGroup
	measureFrom := time.Now().Add(warmup)
	end := measureFrom.Add(duration)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 42))
			c := newCaller()
			for {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				n, err := o(i, r)
				if !t0.Before(measureFrom) {
					c.record(t0, n, err)
				}
			}
			t.add(c)
		}()
	}
	wg.Wait()
	return t.done(duration)
}

// measureRate sends o at a held rate (calls per second, open loop, like
// ghz --rps) from up to clients goroutines: a call is started on every tick
// of the schedule by an idle caller; when all callers are busy the tick
// waits. Calls of ticks due during the warmup, or taken after the end, are
// not counted, so the measured rate is at most the held one. Latency runs
// from the call's start, as ghz counts it.
func measureRate(clients, rate int, duration, warmup time.Duration, o op) *result {
	t := newTally()
	ticks := make(chan time.Time, clients)
	var wg sync.WaitGroup
	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(duration)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 43))
			c := newCaller()
			for tick := range ticks {
				t0 := time.Now()
				if t0.After(end) {
					continue // a tick due in time but taken too late: not sent
				}
				n, err := o(i, r)
				if !tick.Before(measureFrom) {
					c.record(t0, n, err)
				}
			}
			t.add(c)
		}()
	}
	interval := time.Second / time.Duration(rate)
	for k := 0; ; k++ {
		next := start.Add(time.Duration(k) * interval)
		if next.After(end) {
			break
		}
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		ticks <- next
	}
	close(ticks)
	wg.Wait()
	return t.done(duration)
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}
