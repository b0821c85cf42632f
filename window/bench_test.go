package window

import (
	"runtime"
	"testing"
)

// benchLimit is a named Limit.
type benchLimit struct {
	name string
	l    Limit
}

// benchLimits are typical limits of each algorithm.
func benchLimits() []benchLimit {
	return []benchLimit{
		{"sliding_log", Limit{Algorithm: SlidingLog, Limit: 100, Window: 60 * sec}},
		{"sliding_counter", Limit{Algorithm: SlidingCounter, Limit: 1000, Window: 3600 * sec}},
		{"sliding_counter_weighted", Limit{Algorithm: SlidingCounterWeighted, Limit: 1000, Window: 3600 * sec}},
		{"fixed_window", Limit{Algorithm: FixedWindow, Limit: 1000, Window: 60 * sec}},
		{"fixed_window_month", Limit{Algorithm: FixedWindow, Limit: 20_000, Calendar: CalendarMonth}},
		{"token_bucket", Limit{Algorithm: TokenBucket, Limit: 100, Window: sec, Burst: 300}},
		{"gcra", Limit{Algorithm: GCRA, Limit: 100, Window: sec, Burst: 10}},
	}
}

// BenchmarkCheckRecord is one request on a hot key: Check, then Record
// when admitted, with time advancing so every algorithm both admits and
// denies.
func BenchmarkCheckRecord(b *testing.B) {
	for _, bl := range benchLimits() {
		b.Run(bl.name, func(b *testing.B) {
			l := bl.l
			var s State
			now := int64(1.7e18)
			step := max(l.Window, minuteNs) / (3 * l.Limit) // about 3 requests per unit of the limit
			b.ReportAllocs()
			for b.Loop() {
				if d := l.Check(&s, now, 1); d.Allowed {
					l.Record(&s, now, 1)
				}
				now += step
			}
		})
	}
}

// Check must not allocate; Record must not once its buffer is sized.
func TestNoAllocs(t *testing.T) {
	for _, bl := range benchLimits() {
		l := bl.l
		var s State
		now := int64(1.7e18)
		for range 2 * l.Limit {
			l.Record(&s, now, 1)
			now++
		}
		if n := testing.AllocsPerRun(100, func() { l.Check(&s, now, 1); now++ }); n != 0 {
			t.Errorf("%s: Check allocates %v times", bl.name, n)
		}
		if n := testing.AllocsPerRun(100, func() { l.Record(&s, now, 1); now++ }); n != 0 {
			t.Errorf("%s: Record allocates %v times", bl.name, n)
		}
	}
}

// BenchmarkBytesPerKey measures the heap per key of 100,000 States with
// typical content, and the time of a Check on a random one of them (cache
// misses included). The memory is measured once, whatever b.N.
func BenchmarkBytesPerKey(b *testing.B) {
	const keys = 100_000
	now := int64(1.7e18)
	for _, tc := range []struct {
		name string
		l    Limit
		hits int64 // recorded per key, one a nanosecond apart
	}{
		{"fixed_window", Limit{Algorithm: FixedWindow, Limit: 100, Window: 60 * sec}, 3},
		{"token_bucket", Limit{Algorithm: TokenBucket, Limit: 100, Window: 60 * sec}, 3},
		{"gcra", Limit{Algorithm: GCRA, Limit: 100, Window: 60 * sec, Burst: 5}, 3},
		{"sliding_log_10_full", Limit{Algorithm: SlidingLog, Limit: 10, Window: 60 * sec}, 10},
		{"sliding_log_100_full", Limit{Algorithm: SlidingLog, Limit: 100, Window: 60 * sec}, 100},
		{"sliding_log_100_3hits", Limit{Algorithm: SlidingLog, Limit: 100, Window: 60 * sec}, 3},
		{"sliding_counter_60", Limit{Algorithm: SlidingCounter, Limit: 100, Window: 3600 * sec, Buckets: 60}, 3},
		{"sliding_counter_10", Limit{Algorithm: SlidingCounter, Limit: 100, Window: 600 * sec, Buckets: 10}, 3},
		{"sliding_counter_weighted_60", Limit{Algorithm: SlidingCounterWeighted, Limit: 100, Window: 3600 * sec, Buckets: 60}, 3},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := tc.l
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			states := make([]State, keys)
			for i := range states {
				for j := range tc.hits {
					l.Record(&states[i], now+j, 1)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			total := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			i := 0
			for b.Loop() {
				l.Check(&states[(i*7919)%keys], now+tc.hits, 1)
				i++
			}
			runtime.KeepAlive(states)
			// After the loop: its first iteration resets reported metrics.
			b.ReportMetric(total/keys, "bytes/key")
			if l.Algorithm == SlidingLog {
				b.ReportMetric((total-keys*24)/float64(keys*tc.hits), "bytes/timestamp")
			}
		})
	}
}
