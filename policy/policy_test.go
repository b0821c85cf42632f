package policy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/window"
)

const sec = int64(time.Second)

func lim(alg window.Algorithm, limit int64, win time.Duration) Limit {
	l := window.Limit{Algorithm: alg, Limit: limit, Window: int64(win)}
	if alg == window.SlidingCounter || alg == window.SlidingCounterWeighted {
		l.Buckets = 60
	}
	return Limit{Limit: l}
}

func states(p *Policy) []*window.State {
	out := make([]*window.State, p.States())
	for i := range out {
		out[i] = &window.State{}
	}
	return out
}

// run sends n checks of cost 1, one per step, and counts the allowed and
// would-deny answers.
func run(p *Policy, st []*window.State, start, step int64, n int, elastic bool) (allowed, wouldDeny int, last Result) {
	for i := 0; i < n; i++ {
		last = p.Evaluate(st, start+int64(i)*step, 1, elastic)
		if last.Allowed {
			allowed++
		}
		if last.WouldDeny {
			wouldDeny++
		}
	}
	return
}

func TestValidateNamesTheField(t *testing.T) {
	minute := lim(window.SlidingLog, 10, time.Minute)
	hour := lim(window.SlidingCounter, 500, time.Hour)
	long := make([]Limit, MaxLimits+1)
	for i := range long {
		long[i] = lim(window.FixedWindow, 1, time.Duration(i+1)*time.Second)
	}
	for _, tc := range []struct {
		p     Policy
		field string
	}{
		{Policy{Name: "api", Limits: []Limit{minute, hour}}, ""},
		{Policy{Name: "ok", Mode: Soft, SoftPercent: 10, Limits: []Limit{minute}}, ""},
		{Policy{Name: "ok", Mode: Elastic, ElasticCeilingPercent: 150, ElasticCapacity: 1000, Limits: []Limit{minute}}, ""},
		{Policy{Limits: nil}, "limits"},
		{Policy{Limits: long}, "limits"},
		{Policy{Name: "a b", Limits: []Limit{minute}}, "name"},
		{Policy{Name: string(make([]byte, MaxNameLen+1)), Limits: []Limit{minute}}, "name"},
		{Policy{Limits: []Limit{minute, lim(window.FixedWindow, 0, time.Second)}}, "limits[1].limit"},
		{Policy{Limits: []Limit{minute, lim(window.FixedWindow, 5, time.Minute)}}, "limits[1].window"},
		{Policy{Limits: []Limit{{Name: "x", Limit: minute.Limit}, {Name: "x", Limit: hour.Limit}}}, "limits[1].name"},
		{Policy{Limits: []Limit{minute}, Reduced: &Limit{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 3}}}, "reduced.window"},
		{Policy{Mode: Soft, Limits: []Limit{minute}}, "soft_percent"},
		{Policy{Mode: Soft, SoftPercent: MaxSoftPercent + 1, Limits: []Limit{minute}}, "soft_percent"},
		{Policy{Mode: Hard, SoftPercent: 10, Limits: []Limit{minute}}, "soft_percent"},
		{Policy{Mode: Elastic, ElasticCeilingPercent: 100, ElasticCapacity: 5, Limits: []Limit{minute}}, "elastic.ceiling_percent"},
		{Policy{Mode: Elastic, ElasticCeilingPercent: 200, Limits: []Limit{minute}}, "elastic.capacity"},
		{Policy{Mode: Shadow, ElasticCapacity: 5, Limits: []Limit{minute}}, "elastic"},
		{Policy{Mode: 9, Limits: []Limit{minute}}, "mode"},
		{Policy{Consistency: 7, Limits: []Limit{minute}}, "consistency"},
		{Policy{KeyBy: []string{"user", "user"}, Limits: []Limit{minute}}, "key_by[1]"},
		{Policy{KeyBy: []string{"us,er"}, Limits: []Limit{minute}}, "key_by[0]"},
		{Policy{Limits: []Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 2, Calendar: window.CalendarMonth}}}}, "limits[0].calendar"},
	} {
		err := tc.p.Validate(0)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.p, err)
			}
			continue
		}
		var fe *window.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, window.ErrInvalid) {
			t.Errorf("%s: got %v, want an error naming %s", tc.field, err, tc.field)
		}
	}
}

// 10/minute and 500/hour (25 here): admitted only when both admit, counted
// in both only then, and the answer names the limit that decided.
func TestEvaluateIsAtomic(t *testing.T) {
	p := &Policy{Name: "api", Limits: []Limit{
		{Name: "per-minute", Limit: lim(window.SlidingLog, 10, time.Minute).Limit},
		lim(window.SlidingCounter, 25, time.Hour),
	}}
	st := states(p)
	now := int64(1_700_000_000) * sec
	admitted := 0
	for minute := 0; minute < 4; minute++ {
		for i := 0; i < 15; i++ {
			res := p.Evaluate(st, now+int64(minute)*60*sec+int64(i)*sec, 1, false)
			if res.Allowed {
				admitted++
				continue
			}
			if minute < 2 && p.DecidedBy(res) != "per-minute" || minute == 3 && p.DecidedBy(res) != "limits[1]" {
				t.Fatalf("minute %d: denied by %s", minute, p.DecidedBy(res))
			}
		}
		if minute == 2 {
			// Denials count nowhere: this minute the hour admitted 5 and
			// denied 10, and the minute log holds only the 5.
			if d := p.Limits[0].Check(st[0], now+2*60*sec+14*sec, 0); d.Remaining != 5 {
				t.Fatalf("minute limit has %d remaining, want 5: denied requests were counted", d.Remaining)
			}
		}
	}
	if admitted != 25 {
		t.Fatalf("admitted %d, want 10+10+5 (the hour's 25)", admitted)
	}
}

func TestModes(t *testing.T) {
	now := int64(1_700_000_000) * sec
	base := []Limit{lim(window.FixedWindow, 10, time.Hour)}

	soft := &Policy{Mode: Soft, SoftPercent: 20, Limits: base}
	if a, _, last := run(soft, states(soft), now, sec, 20, false); a != 12 || last.Limit != 12 {
		t.Errorf("soft 20%% over 10: admitted %d (limit %d), want 12", a, last.Limit)
	}

	shadow := &Policy{Mode: Shadow, Limits: base}
	st := states(shadow)
	if a, wd, _ := run(shadow, st, now, sec, 15, false); a != 15 || wd != 5 {
		t.Errorf("shadow: %d allowed, %d would-deny; want 15 and 5", a, wd)
	}
	// Shadow counts what enforcement would have: 10, not 15.
	if d := base[0].Check(st[0], now+20*sec, 0); d.Remaining != 0 {
		t.Errorf("shadow counted %d, want exactly the limit", 10-d.Remaining)
	}

	elastic := &Policy{Mode: Elastic, ElasticCeilingPercent: 200, ElasticCapacity: 50, Limits: base}
	if a, _, _ := run(elastic, states(elastic), now, sec, 30, true); a != 20 {
		t.Errorf("elastic with room: admitted %d, want the ceiling 20", a)
	}
	if a, _, _ := run(elastic, states(elastic), now, sec, 30, false); a != 10 {
		t.Errorf("elastic without room: admitted %d, want the base 10", a)
	}

	// After 5 per hour, 2 per minute instead of a hard stop.
	reduced := &Policy{Name: "r", Limits: []Limit{lim(window.SlidingLog, 5, time.Hour)},
		Reduced: &Limit{Name: "slow-lane", Limit: lim(window.SlidingLog, 2, time.Minute).Limit}}
	st = states(reduced)
	a1, _, last := run(reduced, st, now, sec, 10, false)
	a2, _, _ := run(reduced, st, now+60*sec, sec, 10, false)
	if a1 != 7 || a2 != 2 || reduced.DecidedBy(last) != "slow-lane" || last.Outcome != Denied {
		t.Errorf("reduced: %d then %d admitted (last decided by %s, %v), want 5+2 then 2", a1, a2, reduced.DecidedBy(last), last.Outcome)
	}

	// Counting denials keeps a client that keeps trying throttled.
	counting := &Policy{CountDenied: true, Limits: []Limit{lim(window.SlidingLog, 3, 10*time.Second)}}
	st = states(counting)
	run(counting, st, now, sec, 6, false)
	if res := counting.Evaluate(st, now+12*sec, 1, false); res.Allowed {
		t.Error("denied requests were not counted: admitted after the first window passed")
	}
}

// A request both the limits and the reduced limit deny is admitted by
// whichever admits it first, and its RetryAfter says when: the limits'
// wait when they free up before the reduced limit does, and theirs too
// when the reduced limit can never hold the cost.
func TestReducedRetryAfterIsTheFirstAdmission(t *testing.T) {
	p := &Policy{Name: "r", Limits: []Limit{lim(window.SlidingLog, 2, 10*time.Second)},
		Reduced: &Limit{Name: "slow", Limit: lim(window.SlidingLog, 1, time.Minute).Limit}}
	now := int64(1_700_000_000) * sec
	for _, tc := range []struct {
		name string
		cost int64
		want int64
	}{
		// 2 admitted by the limit at 0 s and 1 s, 1 by the reduced limit
		// at 2 s; then the limit has room at 10 s, the reduced limit at 62 s.
		{"the limits free up first", 1, 7 * sec},
		// A cost of 2 never fits the reduced limit of 1; it fits the
		// limit once both its requests have left, at 11 s.
		{"the reduced limit cannot hold the cost", 2, 8 * sec},
	} {
		st := states(p)
		for i, want := range []Outcome{Admitted, Admitted, AdmittedReduced} {
			if res := p.Evaluate(st, now+int64(i)*sec, 1, false); res.Outcome != want {
				t.Fatalf("%s: request %d: %+v, want %v", tc.name, i, res, want)
			}
		}
		res := p.Evaluate(st, now+3*sec, tc.cost, false)
		if res.Allowed || res.RetryAfter != tc.want {
			t.Fatalf("%s: %+v, want denied with retry after %v", tc.name, res, time.Duration(tc.want))
		}
		if again := p.Evaluate(st, now+3*sec+res.RetryAfter, tc.cost, false); again.Outcome != Admitted {
			t.Errorf("%s: retried after %v: %+v, want admitted", tc.name, time.Duration(res.RetryAfter), again)
		}
	}
}

// With CountDenied, a client that waits out each denial's RetryAfter is
// admitted when it retries: the denial it was told about is counted before
// the wait is read. Read before, a bucket's debt or a log's newer
// timestamp denied the retry again, which was counted again, and so on.
func TestCountedDenialIsInItsOwnRetryAfter(t *testing.T) {
	now := int64(1_700_000_000) * sec
	for _, l := range []Limit{
		lim(window.TokenBucket, 1, time.Second),
		lim(window.GCRA, 2, time.Second),
		lim(window.SlidingLog, 2, time.Second),
		lim(window.SlidingCounter, 2, time.Second),
		lim(window.SlidingCounterWeighted, 2, time.Second),
	} {
		for _, mode := range []Mode{Hard, Shadow} {
			p := &Policy{CountDenied: true, Mode: mode, Limits: []Limit{l}}
			st, at := states(p), now
			for p.Evaluate(st, at, 1, false).Outcome == Admitted {
				at += 100 * time.Millisecond.Nanoseconds()
			}
			at += 100 * time.Millisecond.Nanoseconds()
			res := p.Evaluate(st, at, 1, false)
			if res.Allowed && !res.WouldDeny || res.Outcome != DeniedCounted {
				t.Fatalf("%s mode %d: %+v, want a counted denial", l.Algorithm, mode, res)
			}
			if again := p.Evaluate(st, at+res.RetryAfter, 1, false); again.Outcome != Admitted {
				t.Errorf("%s mode %d: denied with retry after %v, and denied again then: %+v", l.Algorithm, mode, time.Duration(res.RetryAfter), again)
			}
		}
	}
}

// A peek answers without counting, in every mode.
func TestPeekCountsNothing(t *testing.T) {
	p := &Policy{Mode: Shadow, CountDenied: true, Limits: []Limit{lim(window.SlidingLog, 1, time.Minute)}}
	st := states(p)
	now := int64(1_700_000_000) * sec
	for i := 0; i < 3; i++ {
		if res := p.Evaluate(st, now, 0, false); !res.Allowed || res.WouldDeny || res.Remaining != 1 || res.Outcome != Denied {
			t.Fatalf("peek %d: %+v", i, res)
		}
	}
	if *st[0] != (window.State{}) {
		t.Fatal("a peek changed the state")
	}
}

func TestEncodingRoundTrips(t *testing.T) {
	p := Policy{Name: "checkout", Mode: Elastic, ElasticCeilingPercent: 300, ElasticCapacity: 5000,
		Consistency: Fast, CountDenied: true, KeyBy: []string{"user", "ip"},
		Limits: []Limit{
			{Name: "burst", Limit: window.Limit{Algorithm: window.TokenBucket, Limit: 100, Window: sec, Burst: 20}},
			{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 20000, Calendar: window.CalendarMonth}},
		},
		Reduced: &Limit{Name: "slow", Limit: window.Limit{Algorithm: window.GCRA, Limit: 1, Window: sec}},
	}
	b := p.AppendBinary([]byte{0xAA})
	got, n, err := Decode(b[1:])
	if err != nil || n != len(b)-1 {
		t.Fatalf("decode: %v, %d of %d bytes", err, n, len(b)-1)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, p)
	}
	for i := 0; i < len(b)-1; i++ {
		if _, _, err := Decode(b[1 : 1+i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", i, err)
		}
	}
}

// A stretched limit is counted as it was checked, on every algorithm: soft
// 10% of 10 admits 11 (of 50, 55), elastic 200% of 10 admits 20 while there
// is room and 10 without. The sliding log used to keep only 10 timestamps
// (admitting every request) and the buckets to refill at the written rate
// (admitting 10).
func TestStretchedLimitsCountAsChecked(t *testing.T) {
	now := int64(1_700_000_000) * sec
	for _, alg := range []window.Algorithm{window.SlidingLog, window.SlidingCounter, window.SlidingCounterWeighted,
		window.FixedWindow, window.TokenBucket, window.GCRA} {
		for _, tc := range []struct {
			mode  Mode
			pct   int64
			limit int64
			room  bool
			want  int
		}{
			{Soft, 10, 10, false, 11},
			{Soft, 10, 50, false, 55},
			{Soft, 8, 50, false, 54},
			{Elastic, 200, 10, true, 20},
			{Elastic, 200, 10, false, 10},
		} {
			l := lim(alg, tc.limit, time.Hour)
			if alg == window.GCRA {
				l.Burst = tc.limit // a bucket of the limit, as the token bucket's
			}
			p := &Policy{Mode: tc.mode, Limits: []Limit{l}}
			if tc.mode == Soft {
				p.SoftPercent = tc.pct
			} else {
				p.ElasticCeilingPercent, p.ElasticCapacity = tc.pct, 1000
			}
			if a, _, _ := run(p, states(p), now, 1, 3*tc.want, tc.room); a != tc.want {
				t.Errorf("%s, %v %d%% of %d (room %v): admitted %d at once, want %d", alg, tc.mode, tc.pct, tc.limit, tc.room, a, tc.want)
			}
		}
	}
}

// Stretched, a token bucket or GCRA refills at the stretched rate too:
// soft 10% of 100 per second admits 110 per second, once its burst is
// spent.
func TestStretchedBucketsRefillStretched(t *testing.T) {
	now := int64(1_700_000_000) * sec
	for _, alg := range []window.Algorithm{window.TokenBucket, window.GCRA} {
		l := lim(alg, 100, time.Second)
		l.Burst = 100 // GCRA's default of 1 would space requests 1/110 s apart, rounded up to the 1ms steps
		p := &Policy{Mode: Soft, SoftPercent: 10, Limits: []Limit{l}}
		st := states(p)
		step := sec / 1000
		run(p, st, now, step, 1000, false) // spend the burst
		if a, _, _ := run(p, st, now+sec, step, 1000, false); a != 110 {
			t.Errorf("%s: admitted %d in the second second, want 110", alg, a)
		}
	}
}

// A sliding log holds its stretched limit's timestamps, so the cap on its
// length applies to the stretched limit.
func TestValidateCapsStretchedLogs(t *testing.T) {
	p := Policy{Mode: Soft, SoftPercent: 10, Limits: []Limit{lim(window.SlidingLog, window.DefaultMaxLogLength, time.Minute)}}
	var fe *window.FieldError
	if err := p.Validate(0); !errors.As(err, &fe) || fe.Field != "limits[0].limit" {
		t.Fatalf("soft 10%% of a log at the cap: %v, want an error naming limits[0].limit", err)
	}
	p.Limits[0].Limit.Limit = window.DefaultMaxLogLength * 100 / 110
	if err := p.Validate(0); err != nil {
		t.Fatalf("soft 10%% of a log within the cap: %v", err)
	}
}

// A name too long to be one is described by its length, never echoed.
func TestValidateNeverEchoesAHugeName(t *testing.T) {
	huge := strings.Repeat("n", 1<<20)
	base := Policy{Name: "ok", Limits: []Limit{lim(window.FixedWindow, 10, time.Minute)}}
	for _, p := range []Policy{
		func() Policy { p := base; p.Name = huge; return p }(),
		func() Policy { p := base; p.KeyBy = []string{huge}; return p }(),
		func() Policy { p := base; p.Limits = []Limit{{Name: huge, Limit: p.Limits[0].Limit}}; return p }(),
	} {
		err := p.Validate(0)
		if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "1048576 bytes") {
			t.Errorf("got %d-byte error %.80q, want a short one giving the length", len(fmt.Sprint(err)), fmt.Sprint(err))
		}
	}
}

// TestElasticLogKeepsCeilingTimestamps: an elastic sliding log that
// counts denials, filled to its ceiling with room, then denied once
// without room, admitted 10 more when room returned (30 in one window of
// a ceiling of 20): the denial was recorded at the unstretched limit,
// which kept only the newest 10 timestamps.
func TestElasticLogKeepsCeilingTimestamps(t *testing.T) {
	p := &Policy{Name: "p", Mode: Elastic, ElasticCeilingPercent: 200, ElasticCapacity: 1000, CountDenied: true,
		Limits: []Limit{lim(window.SlidingLog, 10, time.Minute)}}
	if err := p.Validate(0); err != nil {
		t.Fatal(err)
	}
	st := states(p)
	a1, _, _ := run(p, st, 0, 1, 25, true)
	p.Evaluate(st, sec, 1, false)
	a2, _, _ := run(p, st, 2*sec, 1, 25, true)
	if a1+a2 != 20 {
		t.Fatalf("admitted %d+%d in one window of a ceiling of 20", a1, a2)
	}
}

// TestElasticBucketDenialNeverForgives: an elastic token bucket counting
// denials, run into its full debt without room, then denied once with
// room: that denial moved the bucket's full time back (its debt cap at the
// stretched rate, 16 per 11, is shorter than at 15 per 10), so a counted
// denial made the key admitted sooner.
func TestElasticBucketDenialNeverForgives(t *testing.T) {
	l := lim(window.TokenBucket, 10, 10*time.Second)
	l.Burst = 15
	p := &Policy{Name: "p", Mode: Elastic, ElasticCeilingPercent: 110, ElasticCapacity: 1000, CountDenied: true, Limits: []Limit{l}}
	if err := p.Validate(0); err != nil {
		t.Fatal(err)
	}
	st := states(p)
	run(p, st, 0, 0, 50, false) // full debt
	before := p.Evaluate(st, 0, 0, false).RetryAfter
	p.Evaluate(st, 0, 1, true)
	if after := p.Evaluate(st, 0, 0, false).RetryAfter; after < before {
		t.Fatalf("a denial counted with room cut the wait from %d to %d", before, after)
	}
}

// DecisionLabels lists what DecidedBy can name: each limit by its name or
// place, the reduced limit, and "" (no limit decided).
func TestDecisionLabels(t *testing.T) {
	hour := window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: int64(time.Hour)}
	p := &Policy{Name: "p", Limits: []Limit{{Name: "burst", Limit: hour}, {Limit: hour}}, Reduced: &Limit{Limit: hour}}
	if got, want := p.DecisionLabels(), []string{"", "burst", "limits[1]", "reduced"}; !slices.Equal(got, want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
}
