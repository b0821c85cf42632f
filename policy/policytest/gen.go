package policytest

import (
	"fmt"
	"math/rand/v2"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
	"github.com/floodgate/floodgate/window/windowtest"
)

// Mode is a way of throttling a generated policy uses, and how the
// leader's elastic judgment (room to stretch) is drawn for each request.
type Mode struct {
	Name string
	set  func(rng *rand.Rand, p *policy.Policy)
	room func(rng *rand.Rand) bool
}

// Modes are every throttling mode, elastic with and without room and with
// room coming and going, and the options counting denials and the reduced
// limit, alone and together.
var Modes = []Mode{
	{Name: "hard"},
	{Name: "soft", set: soft},
	{Name: "shadow", set: func(_ *rand.Rand, p *policy.Policy) { p.Mode = policy.Shadow }},
	{Name: "elastic_room", set: elastic, room: func(*rand.Rand) bool { return true }},
	{Name: "elastic_no_room", set: elastic},
	{Name: "elastic_flapping", set: elastic, room: func(rng *rand.Rand) bool { return rng.IntN(2) == 0 }},
	{Name: "count_denied", set: func(_ *rand.Rand, p *policy.Policy) { p.CountDenied = true }},
	{Name: "reduced", set: reduced},
	{Name: "soft_count_denied_reduced", set: func(rng *rand.Rand, p *policy.Policy) {
		soft(rng, p)
		p.CountDenied = true
		reduced(rng, p)
	}},
	{Name: "shadow_count_denied", set: func(_ *rand.Rand, p *policy.Policy) { p.Mode, p.CountDenied = policy.Shadow, true }},
	{Name: "elastic_flapping_count_denied", set: func(rng *rand.Rand, p *policy.Policy) {
		elastic(rng, p)
		p.CountDenied = true
	}, room: func(rng *rand.Rand) bool { return rng.IntN(2) == 0 }},
	{Name: "count_denied_reduced", set: func(rng *rand.Rand, p *policy.Policy) {
		p.CountDenied = true
		reduced(rng, p)
	}},
	{Name: "soft_reduced", set: func(rng *rand.Rand, p *policy.Policy) {
		soft(rng, p)
		reduced(rng, p)
	}},
	{Name: "shadow_count_denied_reduced", set: func(rng *rand.Rand, p *policy.Policy) {
		p.Mode, p.CountDenied = policy.Shadow, true
		reduced(rng, p)
	}},
	{Name: "elastic_flapping_count_denied_reduced", set: func(rng *rand.Rand, p *policy.Policy) {
		elastic(rng, p)
		p.CountDenied = true
		reduced(rng, p)
	}, room: func(rng *rand.Rand) bool { return rng.IntN(2) == 0 }},
}

func soft(rng *rand.Rand, p *policy.Policy) {
	p.Mode = policy.Soft
	p.SoftPercent = [...]int64{1, 8, 10, 50, 100, policy.MaxSoftPercent, rng.Int64N(policy.MaxSoftPercent) + 1}[rng.IntN(7)]
}

func elastic(rng *rand.Rand, p *policy.Policy) {
	p.Mode, p.ElasticCapacity = policy.Elastic, 1000
	p.ElasticCeilingPercent = [...]int64{101, 110, 200, 100 + policy.MaxSoftPercent, rng.Int64N(policy.MaxSoftPercent) + 101}[rng.IntN(5)]
}

func reduced(rng *rand.Rand, p *policy.Policy) {
	l := windowtest.Limit(rng, Kinds[rng.IntN(len(Kinds))].Algorithm)
	p.Reduced = &policy.Limit{Name: "reduced", Limit: l}
}

// Room draws the leader's elastic judgment for one request.
func (m Mode) Room(rng *rand.Rand) bool { return m.room != nil && m.room(rng) }

// Kind is an algorithm to generate limits of; the fixed window comes
// twice, rolling and calendar-aligned.
type Kind struct {
	Name      string
	Algorithm window.Algorithm
	Calendar  bool
}

// Kinds are every algorithm.
var Kinds = []Kind{
	{"sliding_log", window.SlidingLog, false},
	{"sliding_counter", window.SlidingCounter, false},
	{"sliding_counter_weighted", window.SlidingCounterWeighted, false},
	{"fixed_window", window.FixedWindow, false},
	{"fixed_window_calendar", window.FixedWindow, true},
	{"token_bucket", window.TokenBucket, false},
	{"gcra", window.GCRA, false},
}

// limit returns a random limit of kind k.
func (k Kind) limit(rng *rand.Rand) window.Limit {
	for {
		l := windowtest.Limit(rng, k.Algorithm)
		if k.Algorithm != window.FixedWindow || (l.Calendar != window.CalendarNone) == k.Calendar {
			return l
		}
	}
}

// Policy returns a random valid policy in mode m whose first limit is of
// kind k; half of them check a second limit of any kind too.
func Policy(rng *rand.Rand, m Mode, k Kind) *policy.Policy {
	for {
		p := &policy.Policy{Name: "p", Limits: []policy.Limit{{Name: "first", Limit: k.limit(rng)}}}
		if rng.IntN(2) == 0 {
			p.Limits = append(p.Limits, policy.Limit{Limit: Kinds[rng.IntN(len(Kinds))].limit(rng)})
		}
		if m.set != nil {
			m.set(rng, p)
		}
		if p.Validate(0) == nil {
			return p
		}
	}
}

// Request is one request of a generated sequence.
type Request struct {
	// Time is when it arrives (never before the previous one).
	Time int64
	// Cost is often 0 (a peek), 1 or a limit's capacity, now and then more
	// than any limit admits.
	Cost int64
	// Elastic is the leader's judgment that the cluster has room.
	Elastic bool
}

func (r Request) String() string {
	return fmt.Sprintf("t=%d cost=%d elastic=%v", r.Time, r.Cost, r.Elastic)
}

// Requests returns n random requests for p in mode m: time steps and costs
// sized by one of its limits at a time, stretched as far as p goes.
func Requests(rng *rand.Rand, p *policy.Policy, m Mode, n int) []Request {
	all := p.Limits
	if p.Reduced != nil {
		all = append(all[:len(all):len(all)], *p.Reduced)
	}
	now := windowtest.Start(rng, &all[0].Limit)
	out := make([]Request, n)
	for i := range out {
		l := &all[rng.IntN(len(all))].Limit
		now += windowtest.Step(rng, l, now)
		c := Stretched(*l, Stretch(p, true)).Capacity()
		// No entry carries more than MaxLimit: the API refuses it.
		cost := min(windowtest.Cost(rng, c), window.MaxLimit)
		out[i] = Request{Time: now, Cost: cost, Elastic: m.Room(rng)}
	}
	return out
}

// Edit returns an edit of p, as `policy set` of its name with the same
// shapes: one limit (or the reduced limit) gets another valid value or
// burst, and keeps its counts (which the reference then reads with it).
func Edit(rng *rand.Rand, p *policy.Policy) func() {
	return func() {
		all := []*window.Limit{}
		for i := range p.Limits {
			all = append(all, &p.Limits[i].Limit)
		}
		if p.Reduced != nil {
			all = append(all, &p.Reduced.Limit)
		}
		l := all[rng.IntN(len(all))]
		old := *l
		hi := window.MaxLimit
		if l.Algorithm == window.SlidingLog {
			hi = 200
		}
		if l.Algorithm == window.SlidingLog && p.CountDenied {
			// A log keeps only its limit's newest timestamps, so the
			// denials it counted beyond them are gone once an edit raises
			// it within the window (a client that hammered a limit of 10
			// gets 40 more at 50, where it counted 100). Known and
			// accepted: keeping them would cost memory per denial.
			return
		}
		l.Limit = windowtest.Count(rng, hi)
		if l.Burst > 0 || rng.IntN(3) == 0 && (l.Algorithm == window.TokenBucket || l.Algorithm == window.GCRA) {
			l.Burst = windowtest.Count(rng, window.MaxLimit)
		}
		if p.Validate(0) != nil {
			*l = old
		}
	}
}
