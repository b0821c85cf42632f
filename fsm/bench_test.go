package fsm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// BenchmarkStateMemory fills a shard with a million keys of one algorithm
// and reports the heap it takes per key: "bytes/key" in all, and
// "bytes/key-beyond-key", without the bytes of the key itself (the target:
// at most 64 for the counter algorithms, and 64 plus 8 per stored timestamp
// for the sliding log). It runs once per algorithm whatever -benchtime says.
func BenchmarkStateMemory(b *testing.B) {
	const keys = 1_000_000
	minute := int64(time.Minute)
	for _, tc := range []struct {
		name  string
		limit window.Limit
		hits  int64 // timestamps per key, for the log
	}{
		{"fixed_window", window.Limit{Algorithm: window.FixedWindow, Limit: 100, Window: minute}, 1},
		{"fixed_window_month", window.Limit{Algorithm: window.FixedWindow, Limit: 20000, Calendar: window.CalendarMonth}, 1},
		{"token_bucket", window.Limit{Algorithm: window.TokenBucket, Limit: 100, Window: minute}, 1},
		{"gcra", window.Limit{Algorithm: window.GCRA, Limit: 100, Window: minute, Burst: 10}, 1},
		{"sliding_counter_10", window.Limit{Algorithm: window.SlidingCounter, Limit: 100, Window: minute, Buckets: 10}, 1},
		{"sliding_counter_60", window.Limit{Algorithm: window.SlidingCounter, Limit: 100, Window: minute, Buckets: 60}, 1},
		{"sliding_counter_weighted_10", window.Limit{Algorithm: window.SlidingCounterWeighted, Limit: 100, Window: minute, Buckets: 10}, 1},
		{"sliding_log_1_hit", window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: minute}, 1},
		{"sliding_log_10_full", window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: minute}, 10},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := &policy.Policy{Limits: []policy.Limit{{Limit: tc.limit}}}
			names := make([]string, keys)
			keyBytes := 0
			for i := range names {
				names[i] = fmt.Sprintf("user:%07d", i)
				keyBytes += len(names[i])
			}
			ts := int64(1_700_000_000) * int64(time.Second)
			var s *Shard
			var before, after runtime.MemStats
			for range b.N {
				runtime.GC()
				runtime.ReadMemStats(&before)
				s = NewShard()
				s.now = ts
				for _, k := range names {
					s.eval(p, []byte(k), tc.hits, false)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
			}
			if got := s.Stats().States; got != keys {
				b.Fatalf("%d states, want %d", got, keys)
			}
			perKey := float64(after.HeapAlloc-before.HeapAlloc) / keys
			b.ReportMetric(perKey, "bytes/key")
			b.ReportMetric(perKey-float64(keyBytes)/keys, "bytes/key-beyond-key")
			if tc.limit.Algorithm == window.SlidingLog {
				b.ReportMetric(float64(tc.hits), "timestamps/key")
			}
			runtime.KeepAlive(s)
		})
	}
}

// BenchmarkApply measures applying entries of 100 checks over a million
// keys, per check.
func BenchmarkApply(b *testing.B) {
	s := NewShard()
	p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 100, Window: int64(time.Minute)}}}}
	checks := make([]Check, 100)
	ts := int64(1_700_000_000) * int64(time.Second)
	b.ReportAllocs()
	for i := range b.N {
		b.StopTimer()
		for j := range checks {
			checks[j] = Check{Key: fmt.Sprintf("user:%d", (i*100+j)%1_000_000), Policy: p, Cost: 1}
		}
		entry := allowLog(uint64(i+1), ts+int64(i)*int64(time.Millisecond), checks...)
		b.StartTimer()
		s.Apply(entry)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(checks)), "ns/check")
}

// BenchmarkApplyHeldKeys measures applying entries of 100 checks of random
// keys a group already holds (a third of make bench's 100,000), per check:
// what a replica's apply costs under load once the keys are known, where
// the table's lookup and the sweeper meet cache misses rather than new
// records. Log time moves 1 ms an entry and the sliding log's window is a
// second, so each key holds a steady three timestamps or so however long
// it runs.
func BenchmarkApplyHeldKeys(b *testing.B) {
	const keys = 33_000
	s := NewShard()
	p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 10_000, Window: int64(time.Second)}}}}
	r := rand.New(rand.NewPCG(1, 2))
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("k%08d-%d", r.IntN(100_000_000), i)
	}
	ts := int64(1_700_000_000) * int64(time.Second)
	index := uint64(0)
	checks := make([]Check, 100)
	for i := 0; i < keys; i += len(checks) { // every key held
		for j := range checks {
			checks[j] = Check{Key: names[(i+j)%keys], Policy: p, Cost: 1}
		}
		index++
		s.Apply(allowLog(index, ts, checks...))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for j := range checks {
			checks[j] = Check{Key: names[r.IntN(keys)], Policy: p, Cost: 1}
		}
		index++
		ts += int64(time.Millisecond)
		e := allowLog(index, ts, checks...)
		b.StartTimer()
		s.Apply(e)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(checks)), "ns/check")
}

// BenchmarkApplyCallersPolicies measures encoding and applying entries of 16
// checks whose callers each gave their own copy of one inline limit (as
// single Allow calls gathered by group commit do), per check.
func BenchmarkApplyCallersPolicies(b *testing.B) {
	s := NewShard()
	checks := make([]Check, 16)
	for j := range checks {
		checks[j] = Check{Policy: &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 1000, Window: int64(time.Second)}}}}, Cost: 1}
	}
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	ts := int64(1_700_000_000) * int64(time.Second)
	b.ReportAllocs()
	for i := range b.N {
		for j := range checks {
			checks[j].Key = keys[(i*len(checks)+j)%len(keys)]
		}
		s.Apply(allowLog(uint64(i+1), ts+int64(i)*int64(time.Millisecond), checks...))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(checks)), "ns/check")
}

// BenchmarkSnapshotCapture is what a snapshot of a third of make bench's
// keys costs, and how long a group's applies wait for it: pause-ns is
// Snapshot (raft calls it between applies), hold-ns a step of the
// capture's pass on average (each holds the shard's lock), ns/op the
// whole capture, sorted and written. Before captures copied on write, applies
// waited for the whole copy: 4.5-6.2 ms here, 150-210 ms at a million
// states.
func BenchmarkSnapshotCapture(b *testing.B) {
	for _, keys := range []int{33_000} { // a group's share of make bench's 100,000 keys
		for _, alg := range []window.Algorithm{window.SlidingLog, window.TokenBucket} {
			b.Run(fmt.Sprintf("%d-%v", keys, alg), func(b *testing.B) {
				p := inline(window.Limit{Algorithm: alg, Limit: 10000, Window: 60 * sec})
				s := NewShard()
				var checks []Check
				idx := uint64(1)
				for i := range keys {
					checks = append(checks, Check{Key: fmt.Sprintf("bench:%d", i), Policy: p, Cost: 1})
					if len(checks) == 1000 {
						s.Apply(allowLog(idx, 1000*sec+int64(idx), checks...))
						idx++
						checks = checks[:0]
					}
				}
				var pause, hold time.Duration
				steps := 0
				b.ResetTimer()
				for range b.N {
					t0 := time.Now()
					snap, err := s.Snapshot()
					pause += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					snap.(*liveSnapshot).reserve()
					for over := false; !over; {
						t0 = time.Now()
						s.mu.Lock()
						over = snap.(*liveSnapshot).c.step(captureStep)
						s.mu.Unlock()
						hold += time.Since(t0)
						steps++
					}
					if err := snap.Persist(&discardSink{}); err != nil {
						b.Fatal(err)
					}
					snap.Release()
				}
				b.ReportMetric(float64(pause.Nanoseconds())/float64(b.N), "pause-ns")
				b.ReportMetric(float64(hold.Nanoseconds())/float64(steps), "hold-ns")
			})
		}
	}
}

// discardSink is a snapshot sink that keeps nothing.
type discardSink struct{}

func (discardSink) Write(p []byte) (int, error) { return len(p), nil }
func (discardSink) ID() string                  { return "discard" }
func (discardSink) Cancel() error               { return nil }
func (discardSink) Close() error                { return nil }

// bigGroup returns a group that owns all of slots and holds keys states
// of keys "user:<i>", a sliding log of one timestamp each: the keys by
// slot, their policy, the entries' timestamp, and apply, which writes the
// next entry.
func bigGroup(slots, keys int) (s *Shard, apply func([]byte), bySlot [][]string, p *policy.Policy, ts int64) {
	all := make([]uint32, slots)
	for i := range all {
		all[i] = uint32(i)
	}
	s = NewShard()
	idx := uint64(1)
	apply = func(data []byte) {
		idx++
		s.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
	}
	apply(EncodeInit(1, uint32(slots), all))
	p = inline(window.Limit{Algorithm: window.SlidingLog, Limit: 100, Window: 3600 * sec})
	ts = int64(1_700_000_000) * sec
	bySlot = make([][]string, slots)
	var checks []Check
	for i := range keys {
		k := fmt.Sprintf("user:%d", i)
		bySlot[hashing.ShardOf(k, slots)] = append(bySlot[hashing.ShardOf(k, slots)], k)
		checks = append(checks, Check{Key: k, Policy: p, Cost: 1})
		if len(checks) == 1000 {
			apply(EncodeAllow(nil, ts, checks))
			checks = checks[:0]
		}
	}
	return s, apply, bySlot, p, ts
}

// BenchmarkDropSlots measures a slot move's drop at its source, a group
// of 500,000 states dropping 64 of its 4,096 slots (about 7,800 states),
// and what freeing them costs the entries after: drop-ns is the drop
// entry's apply, sweep-entries how many entries of one check it took to
// free the orphans, sweep-entry-ns what one of them took on average and
// entry-ns one such entry once they are freed. A drop that freed its
// states at once looked at every record: 18 ms here.
func BenchmarkDropSlots(b *testing.B) {
	const slots, keys = 4096, 500_000
	s, apply, bySlot, p, ts := bigGroup(slots, keys)
	var checks []Check
	empty, _ := NewShard().ExportAll()
	var drop, sweeping, after time.Duration
	entries := 0
	b.ResetTimer()
	for i := range b.N {
		move := uint64(2*i + 1)
		sl := make([]uint32, 64)
		for j := range sl {
			sl[j] = uint32((i*64 + j) % slots)
		}
		apply(EncodeFreeze(move, sl))
		t0 := time.Now()
		apply(EncodeDrop(move))
		drop += time.Since(t0)
		one := []Check{{Key: fmt.Sprintf("user:%d", i%keys), Policy: p, Cost: 1}}
		n := 0
		t0 = time.Now()
		for ; s.Stats().Orphans > 0; n++ {
			apply(EncodeAllow(nil, ts, one))
		}
		sweeping += time.Since(t0)
		t0 = time.Now()
		for range n {
			apply(EncodeAllow(nil, ts, one))
		}
		after += time.Since(t0)
		entries += n
		// The slots come back with their keys, for later iterations.
		b.StopTimer()
		apply(EncodeImport(move+1, 2, sl, empty))
		for _, x := range sl {
			checks = checks[:0]
			for _, k := range bySlot[x] {
				checks = append(checks, Check{Key: k, Policy: p, Cost: 1})
			}
			apply(EncodeAllow(nil, ts, checks))
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(drop.Nanoseconds())/float64(b.N), "drop-ns")
	b.ReportMetric(float64(entries)/float64(b.N), "sweep-entries")
	b.ReportMetric(float64(sweeping.Nanoseconds())/float64(entries), "sweep-entry-ns")
	b.ReportMetric(float64(after.Nanoseconds())/float64(entries), "entry-ns")
}

// BenchmarkTableGrowth fills a table with 1,600,000 identities, 100 per
// step as an entry of new keys would, and reports the slowest step
// (slowest-ns) and the mean (step-ns): the index grows 11 times on the
// way, moving a few records per insert (regrow.go). Rebuilt at once, the
// growths at 786,432 and 1,572,864 records held the lock 58 and 150 ms.
func BenchmarkTableGrowth(b *testing.B) {
	const n, step = 1_600_000, 100
	ids := make([][]byte, n)
	for i := range ids {
		ids[i] = testID(fmt.Sprintf("user:%d", i))
	}
	var slowest, total time.Duration
	b.ResetTimer()
	for range b.N {
		tab := newTable()
		for i := 0; i < n; i += step {
			t0 := time.Now()
			for _, id := range ids[i : i+step] {
				tab.insert(id, window.State{})
			}
			d := time.Since(t0)
			slowest, total = max(slowest, d), total+d
		}
	}
	b.ReportMetric(float64(slowest.Nanoseconds()), "slowest-ns")
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*n/step), "step-ns")
}

// BenchmarkCompaction fills a table with 2,000,000 records of which
// three in four expire (every-fourth: spread out; tail: the newest ones,
// a burst of new keys gone idle), then sweeps as entries would (budget
// 64) until the expired are freed, the record space compacted and the
// index shrunk: slowest-ns is the slowest sweep, sweeps how many it took.
// Compacting every record at once, when the sweeper wrapped, held the
// lock 310-351 ms (every-fourth).
func BenchmarkCompaction(b *testing.B) {
	const n = 2_000_000
	for _, c := range []struct {
		name  string
		lives func(i int) bool
	}{
		{"every-fourth", func(i int) bool { return i%4 == 0 }},
		{"tail", func(i int) bool { return i < n/4 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var slowest time.Duration
			sweeps := 0
			for range b.N {
				b.StopTimer()
				tab := newTable()
				for i := range n {
					exp := int64(50)
					if c.lives(i) {
						exp = 1 << 40
					}
					tab.insert(testID(fmt.Sprintf("user:%d", i)), expiringAt(exp))
				}
				tab.settle()
				b.StartTimer()
				for tab.live > n/4 || tab.compacting || tab.old != nil || int(tab.used) > tab.live {
					t0 := time.Now()
					tab.sweep(100, 64)
					slowest = max(slowest, time.Since(t0))
					sweeps++
				}
			}
			b.ReportMetric(float64(slowest.Nanoseconds()), "slowest-ns")
			b.ReportMetric(float64(sweeps)/float64(b.N), "sweeps")
		})
	}
}

// BenchmarkExportSlots is a slot move's export at its source, a group of
// 500,000 states exporting 1 or 64 of its 4,096 slots (about 120 or
// 7,800 states), with and without a watch of the slots (watch.go): the
// export sits in the window in which the slots answer no check. Without
// a watch it looks at every record for the slots' states; the watch's
// own walk (walk-ns) happens before the freeze.
func BenchmarkExportSlots(b *testing.B) {
	const slots, keys = 4096, 500_000
	s, apply, _, _, _ := bigGroup(slots, keys)
	move := uint64(0)
	for _, n := range []int{1, 64} {
		for _, watched := range []bool{false, true} {
			b.Run(fmt.Sprintf("slots=%d/watched=%v", n, watched), func(b *testing.B) {
				var walk time.Duration
				for range b.N {
					move++
					sl := make([]uint32, n)
					for j := range sl {
						sl[j] = uint32((int(move)*n + j) % slots)
					}
					if watched {
						b.StopTimer()
						t0 := time.Now()
						if err := s.WatchSlots(move, sl); err != nil {
							b.Fatal(err)
						}
						walk += time.Since(t0)
						b.StartTimer()
					}
					apply(EncodeFreeze(move, sl))
					if _, err := s.ExportSlots(move, sl); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					// The slots stay, owned again, for later iterations.
					s.mu.Lock()
					for _, x := range sl {
						s.own.state[x] = slotOwned
					}
					s.tab.unwatch(move)
					s.mu.Unlock()
					b.StartTimer()
				}
				b.ReportMetric(float64(walk.Nanoseconds())/float64(b.N), "walk-ns")
			})
		}
	}
}

// BenchmarkIdleTick is an idle group's ticks once its 2,000,000 states
// have expired (its traffic stopped an hour ago), until they are all
// freed: each tick frees what it looks at, compaction and the index's
// shrinking follow, and the slowest tick (slowest-ns) holds the group's
// lock that long for a check arriving meanwhile; tick-ns is a tick on
// average, ticks how many it took. A tick sweeps a 32nd of the records, at
// most maxTickSweep (TickInterval ticks a group this large more often);
// a 32nd uncapped was 62,500 records here.
func BenchmarkIdleTick(b *testing.B) {
	var slowest, total time.Duration
	ticks := 0
	for range b.N {
		b.StopTimer()
		s, apply, _, _, ts := bigGroup(4096, 2_000_000)
		b.StartTimer()
		for i := 0; s.Stats().Records > 0; i++ {
			if i > 10_000 {
				b.Fatal("the ticks never freed the group")
			}
			t0 := time.Now()
			apply(EncodeTick(ts + 2*3600*sec + int64(i+1)*sec))
			d := time.Since(t0)
			slowest, total = max(slowest, d), total+d
			ticks++
		}
	}
	b.ReportMetric(float64(slowest.Nanoseconds()), "slowest-ns")
	b.ReportMetric(float64(total.Nanoseconds())/float64(ticks), "tick-ns")
	b.ReportMetric(float64(ticks)/float64(b.N), "ticks")
}

// BenchmarkVet is a leader's judgment of one check before it writes, of a
// held key and of a new one, under the state bound alone and under both
// bounds (the bytes a check may add are counted from the same lookups).
func BenchmarkVet(b *testing.B) {
	p := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 100, Window: 3600 * sec})
	s := NewShard()
	var checks []Check
	for i := range 10_000 {
		checks = append(checks, Check{Key: fmt.Sprintf("held-%d", i), Policy: p, Cost: 1})
	}
	s.Apply(allowLog(1, 1000*sec, checks...))
	for _, bound := range []struct {
		name string
		most Room
	}{{"states", Room{States: 1 << 30}}, {"states+bytes", Room{States: 1 << 30, Bytes: 1 << 40}}} {
		for _, key := range []string{"held-7", "new"} {
			b.Run(bound.name+"/"+key, func(b *testing.B) {
				c := []Check{{Key: key, Policy: p, Cost: 1}}
				for b.Loop() {
					if v, _ := s.Vet(c, bound.most, nil); v != Take {
						b.Fatal(v)
					}
				}
			})
		}
	}
}
