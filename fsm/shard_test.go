package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

const sec = int64(time.Second)

func allowLog(index uint64, ts int64, checks ...Check) *raft.Log {
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: EncodeAllow(nil, ts, checks)}
}

func inline(l window.Limit) *policy.Policy { return &policy.Policy{Limits: []policy.Limit{{Limit: l}}} }

func TestApplyAnswersInOrder(t *testing.T) {
	s := NewShard()
	p := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 3, Window: 60 * sec})
	var checks []Check
	for i := 0; i < 5; i++ {
		checks = append(checks, Check{Key: "user:1", Policy: p, Cost: 1})
	}
	checks = append(checks, Check{Key: "user:2", Policy: p, Cost: 3})
	res, ok := s.Apply(allowLog(1, 1000*sec, checks...)).([]policy.Result)
	if !ok || len(res) != 6 {
		t.Fatalf("apply returned %v", res)
	}
	for i, want := range []bool{true, true, true, false, false, true} {
		if res[i].Allowed != want {
			t.Errorf("check %d allowed=%v, want %v", i, res[i].Allowed, want)
		}
	}
	if res[2].Remaining != 0 || res[3].RetryAfter != 60*sec {
		t.Errorf("third: remaining %d; fourth: retry after %d", res[2].Remaining, res[3].RetryAfter)
	}
	if res[0].ResetAt != 1060*sec {
		t.Errorf("reset at %d, want the first request's time plus the window", res[0].ResetAt)
	}
}

// A policy admits only when every limit does, and counts in every limit
// only then.
func TestPolicyLimitsAreAtomic(t *testing.T) {
	s := NewShard()
	p := &policy.Policy{Name: "api", Limits: []policy.Limit{
		{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: 60 * sec}},
		{Limit: window.Limit{Algorithm: window.SlidingCounter, Limit: 15, Window: 3600 * sec, Buckets: 60}},
	}}
	admitted := 0
	ts := int64(1_700_000_000) * sec
	for i := 0; i < 40; i++ {
		res := s.Apply(allowLog(uint64(i+1), ts+int64(i)*10*sec, Check{Key: "u", Policy: p, Cost: 1})).([]policy.Result)
		if res[0].Allowed {
			admitted++
		}
	}
	// 10 per minute lets 6 a minute through at one per 10s; the hour caps
	// the total at 15.
	if admitted != 15 {
		t.Fatalf("admitted %d in 400s, want the hourly 15", admitted)
	}
}

// Replaying the same log on two replicas, in different batchings, gives
// byte-identical snapshots; a third replica restored from one of them
// snapshots the same bytes and stays identical as the log goes on.
func TestReplicasAgreeByteForByte(t *testing.T) {
	logs := randomLog(1, 3000)
	a, b, c := NewShard(), NewShard(), NewShard()
	half := len(logs) / 2
	for _, l := range logs[:half] {
		a.Apply(l)
	}
	for i := 0; i < half; i += 7 {
		b.ApplyBatch(logs[i:min(i+7, half)])
	}
	snapA, snapB := snapshotBytes(t, a), snapshotBytes(t, b)
	if !bytes.Equal(snapA, snapB) {
		t.Fatal("replicas that applied the same log wrote different snapshots")
	}
	if err := c.Restore(io.NopCloser(bytes.NewReader(snapA))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, c), snapA) {
		t.Fatal("restored replica snapshots different bytes")
	}
	for _, l := range logs[half:] {
		ra, rc := a.Apply(l), c.Apply(l)
		if fmt.Sprint(ra) != fmt.Sprint(rc) {
			t.Fatalf("entry %d: original answered %v, restored replica %v", l.Index, ra, rc)
		}
		b.Apply(l)
	}
	final := snapshotBytes(t, a)
	if !bytes.Equal(final, snapshotBytes(t, b)) || !bytes.Equal(final, snapshotBytes(t, c)) {
		t.Fatal("replicas diverged after the restore")
	}
	if a.Stats().States == 0 {
		t.Fatal("the log left no state: the test checks nothing")
	}
}

// randomLog builds entries of random checks over every algorithm, with
// timestamps that jitter backwards (a new leader with a slower clock) and
// occasional jumps past every window, plus ticks.
func randomLog(seed uint64, n int) []*raft.Log { return randomLogOver(seed, n, 40) }

// samplePolicies are policies of every algorithm and mode, inline.
func samplePolicies() []*policy.Policy {
	return []*policy.Policy{
		inline(window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: 10 * sec}),
		inline(window.Limit{Algorithm: window.SlidingCounter, Limit: 20, Window: 60 * sec, Buckets: 6}),
		inline(window.Limit{Algorithm: window.SlidingCounterWeighted, Limit: 20, Window: 60 * sec, Buckets: 6}),
		inline(window.Limit{Algorithm: window.FixedWindow, Limit: 7, Window: 30 * sec}),
		inline(window.Limit{Algorithm: window.FixedWindow, Limit: 100, Calendar: window.CalendarMonth}),
		inline(window.Limit{Algorithm: window.TokenBucket, Limit: 10, Window: 10 * sec, Burst: 4}),
		inline(window.Limit{Algorithm: window.GCRA, Limit: 3, Window: sec}),
		{Name: "two", Limits: []policy.Limit{
			{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 3, Window: 5 * sec}},
			{Limit: window.Limit{Algorithm: window.SlidingCounter, Limit: 8, Window: 60 * sec, Buckets: 12}},
		}},
		{Name: "reduced", CountDenied: true,
			Limits:  []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 4, Window: 20 * sec}}},
			Reduced: &policy.Limit{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 2, Window: 20 * sec}}},
		{Name: "soft", Mode: policy.Soft, SoftPercent: 50,
			Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 4, Window: 10 * sec}}}},
		{Name: "shadow", Mode: policy.Shadow,
			Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.TokenBucket, Limit: 3, Window: 10 * sec}}}},
		{Name: "elastic", Mode: policy.Elastic, ElasticCeilingPercent: 200, ElasticCapacity: 100,
			Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingCounterWeighted, Limit: 5, Window: 30 * sec, Buckets: 3}}}},
	}
}

// randomLogOver is randomLog over keys keys.
func randomLogOver(seed uint64, n, keys int) []*raft.Log {
	r := rand.New(rand.NewPCG(seed, 99))
	pols := samplePolicies()
	ts := int64(1_700_000_000) * sec
	var logs []*raft.Log
	for i := 0; i < n; i++ {
		ts += int64(r.IntN(400)) * int64(time.Millisecond)
		if r.IntN(50) == 0 {
			ts += 120 * sec
		}
		stamp := ts - int64(r.IntN(3))*sec // sometimes behind the previous entry
		switch r.IntN(20) {
		case 0:
			logs = append(logs, &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: EncodeTick(stamp)})
			continue
		case 1:
			data := EncodeReset(stamp, fmt.Sprintf("k%d", r.IntN(keys)), pols[r.IntN(len(pols))])
			logs = append(logs, &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data})
			continue
		case 2, 3:
			var hits []Hit
			for j := r.IntN(6); j >= 0; j-- {
				hits = append(hits, Hit{Key: fmt.Sprintf("k%d", r.IntN(keys)), Policy: pols[r.IntN(len(pols))],
					Cost: int64(1 + r.IntN(2)), Time: stamp - int64(r.IntN(900))*int64(time.Millisecond),
					Outcome: policy.Outcome(r.IntN(5))})
			}
			data := EncodeHits(nil, stamp, hits)
			logs = append(logs, &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data})
			continue
		}
		var checks []Check
		for j := r.IntN(8); j >= 0; j-- {
			p := pols[r.IntN(len(pols))]
			checks = append(checks, Check{Key: fmt.Sprintf("k%d", r.IntN(keys)), Policy: p, Cost: int64(r.IntN(3)), Elastic: r.IntN(2) == 0})
		}
		logs = append(logs, allowLog(uint64(i+1), stamp, checks...))
	}
	return logs
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

func snapshotBytes(t *testing.T, s raft.FSM) []byte {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return persist(t, snap)
}

// Keys go away once every window that refers to them has passed, driven
// only by log time.
func TestIdleKeysExpireByLogTime(t *testing.T) {
	s := NewShard()
	p := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: 60 * sec})
	long := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 5, Window: 3600 * sec})
	ts := int64(1_700_000_000) * sec
	var checks []Check
	for i := 0; i < 5000; i++ {
		checks = append(checks, Check{Key: fmt.Sprint("k", i), Policy: p, Cost: 1})
	}
	checks = append(checks, Check{Key: "hourly", Policy: long, Cost: 1})
	s.Apply(allowLog(1, ts, checks...))
	if got := s.Stats().States; got != 5001 {
		t.Fatalf("%d states, want 5001", got)
	}
	// 59s later nothing may go; 61s later the minute keys are all idle.
	for i, dt := range []int64{59, 61, 62, 63, 64, 65, 66} {
		s.Apply(&raft.Log{Index: uint64(2 + i), Type: raft.LogCommand, Data: EncodeTick(ts + dt*sec)})
		if dt == 59 && s.Stats().States != 5001 {
			t.Fatalf("states expired before their window passed: %d left", s.Stats().States)
		}
	}
	if got := s.Stats().States; got != 1 {
		t.Fatalf("%d states after the minute passed, want only the hourly one", got)
	}
	// Peeks and denials never create state.
	peek := Check{Key: "ghost", Policy: p, Cost: 0}
	s.Apply(allowLog(20, ts+70*sec, peek))
	if got := s.Stats().States; got != 1 {
		t.Fatalf("a peek created state: %d", got)
	}
}

// The sweeper keeps pace with a flood of new keys without ticks (a loaded
// group writes none): each entry adds keys whose one-second windows end a
// second later, and the states held stay near those still in their window,
// for every shape of entry. Checks on held keys add no sweeping, yet keys
// that expire under such traffic are reclaimed by the entries' own pace.
func TestSweeperKeepsPaceWithNewKeys(t *testing.T) {
	p := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: sec})
	for _, perEntry := range []int{1, 10, 100} {
		s := NewShard()
		ts := int64(1_700_000_000) * sec
		step := sec / 10      // ten entries per second of log time
		live := 10 * perEntry // keys still inside their window
		index, key := uint64(1), 0
		for range 2000 {
			var checks []Check
			for range perEntry {
				checks = append(checks, Check{Key: fmt.Sprint("k", key), Policy: p, Cost: 1})
				key++
			}
			s.Apply(allowLog(index, ts, checks...))
			index++
			ts += step
		}
		if got := s.Stats().States; got > 3*live+sweepPerEntry*10 {
			t.Errorf("%d keys per entry: %d states held, want near the %d in their window", perEntry, got, live)
		}
		// Traffic on held keys only: the flood's states expire and go.
		held := []Check{{Key: "k0", Policy: p, Cost: 1}}
		for range 2000 {
			s.Apply(allowLog(index, ts, held...))
			index++
			ts += step
		}
		if got := s.Stats().States; got > 1 {
			t.Errorf("%d keys per entry: %d states left under traffic on one key, want 1", perEntry, got)
		}
	}
}

// Applying checks of held keys allocates per entry (its decoding and its
// answers), not per check: a check's gathered states are the shard's
// scratch, not an allocation each, on every replica.
func TestApplyHeldKeysAllocatesPerEntry(t *testing.T) {
	p := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 1000, Window: 60 * sec}) // fixed-size states: no ring grows
	ts := int64(1_700_000_000) * sec
	s := NewShard()
	one := func(n int) *raft.Log {
		var checks []Check
		for i := range n {
			checks = append(checks, Check{Key: fmt.Sprint("k", i), Policy: p, Cost: 1})
		}
		return allowLog(1, ts, checks...)
	}
	s.Apply(one(100)) // every key held
	small, large := one(1), one(100)
	at := func(e *raft.Log) float64 {
		return testing.AllocsPerRun(50, func() {
			e.Index++
			s.Apply(e)
		})
	}
	a1, a100 := at(small), at(large)
	if a100-a1 > 10 {
		t.Fatalf("an entry of 100 checks of held keys allocated %.0f times, one of 1 check %.0f: more than per entry", a100, a1)
	}
}

func TestCorruptEntriesAreRefused(t *testing.T) {
	s := NewShard()
	good := EncodeAllow(nil, sec, []Check{{Key: "k", Policy: inline(window.Limit{Algorithm: window.SlidingLog, Limit: 1, Window: sec}), Cost: 1}})
	for name, data := range map[string][]byte{
		"truncated": good[:len(good)-2],
		"version 0": append([]byte{cmdAllow, 0}, good[2:]...),
		"bad tick":  {cmdTick},
		"no body":   {cmdHits},
	} {
		if err, ok := s.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data}).(error); !ok || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	if s.Stats().States != 0 {
		t.Fatal("a refused entry changed state")
	}
}

func TestRestoreRejectsDamagedSnapshots(t *testing.T) {
	s := NewShard()
	s.Apply(randomLog(3, 1)[0])
	s.Apply(allowLog(2, 2*sec, Check{Key: "k", Policy: inline(window.Limit{Algorithm: window.FixedWindow, Limit: 3, Window: 100 * sec}), Cost: 1}))
	good := snapshotBytes(t, s)
	flip := bytes.Clone(good)
	flip[len(flip)/2] ^= 0xff
	newer := bytes.Clone(good)
	newer[4] = shardVersion + 1
	for name, data := range map[string][]byte{
		"checksum": flip, "version": newer, "magic": []byte("nope, not a snapshot"), "empty": nil,
	} {
		fresh := NewShard()
		if err := fresh.Restore(io.NopCloser(bytes.NewReader(data))); err == nil {
			t.Errorf("%s: restored a damaged snapshot", name)
		}
		if fresh.Stats().States != 0 {
			t.Errorf("%s: a failed restore left state behind", name)
		}
	}
	restored := NewShard()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(good))); err != nil {
		t.Fatal(err)
	}
	if restored.Stats() != s.Stats() {
		t.Fatalf("restored %+v, want %+v", restored.Stats(), s.Stats())
	}
}

// A state is forgotten only once it is full however its limit is read: a
// GCRA stretched from 1 to 2 per 3ns is full again at 1.5ns, which read
// unstretched (in whole units of 1/1 ns) rounds down to 1.
func TestStretchedBucketIsNotForgottenEarly(t *testing.T) {
	s := NewShard()
	p := &policy.Policy{Name: "e", Mode: policy.Elastic, ElasticCeilingPercent: 200, ElasticCapacity: 1,
		Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.GCRA, Limit: 1, Window: 3}}}}
	if res := s.Apply(allowLog(1, 0, Check{Key: "k", Policy: p, Cost: 1, Elastic: true})).([]policy.Result); !res[0].Allowed {
		t.Fatalf("first request: %+v", res[0])
	}
	if res := s.Apply(allowLog(2, 1, Check{Key: "k", Policy: p, Cost: 1, Elastic: true})).([]policy.Result); res[0].Allowed {
		t.Fatalf("at 1ns, before the stretched bucket is full again (1.5ns): %+v", res[0])
	}
}

// An entry this binary cannot interpret, an unknown type or a newer body
// version, stops the node loudly instead of being skipped, and changes
// nothing first.
func TestUnknownEntriesStopTheNode(t *testing.T) {
	good := EncodeAllow(nil, sec, []Check{{Key: "k", Policy: inline(window.Limit{Algorithm: window.SlidingLog, Limit: 1, Window: sec}), Cost: 1}})
	hits := EncodeHits(nil, sec, []Hit{{Key: "k", Policy: inline(window.Limit{Algorithm: window.SlidingLog, Limit: 1, Window: sec}), Cost: 1, Time: sec, Outcome: policy.Admitted}})
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"unknown type", []byte{99, 1, 2}, "has type 99"},
		{"type 0", []byte{0}, "has type 0"},
		{"newer allow", append([]byte{cmdAllow, allowVersion + 1}, good[2:]...), "type 1 has body version 3"},
		{"newer hits", append([]byte{cmdHits, hitsVersion + 1}, hits[2:]...), "type 4 has body version 3"},
		{"newer reset", append([]byte{cmdReset, 0xff}, good[2:]...), "type 3 has body version 255"},
	} {
		s := NewShard()
		err := stopped(t, func() { s.Apply(&raft.Log{Index: 42, Type: raft.LogCommand, Data: tc.data}) })
		if !errors.Is(err, ErrUnknownEntry) || !strings.Contains(err.Error(), "shard log entry 42") ||
			!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "written by a newer floodgate?") {
			t.Errorf("%s: stopped with %v", tc.name, err)
		}
		if s.Stats() != (Stats{}) {
			t.Errorf("%s: changed the state before stopping", tc.name)
		}
	}
	m := NewMeta()
	err := stopped(t, func() { m.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: []byte{metaLast + 1}}) })
	if !errors.Is(err, ErrUnknownEntry) || !strings.Contains(err.Error(), "meta log entry 7 has type 15") ||
		!strings.Contains(err.Error(), "written by a newer floodgate?") {
		t.Errorf("meta: stopped with %v", err)
	}
}

// stopped runs f and returns the error it panicked with.
func stopped(t *testing.T, f func()) (err error) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("applied instead of stopping")
		}
		err, _ = r.(error)
	}()
	f()
	return nil
}
