package policy

import (
	"strings"

	"errors"

	"github.com/floodgate/floodgate/window"
)

// Errors. Validation errors are *window.FieldError values (they match
// window.ErrInvalid) whose Field is a path such as "limits[1].window".
var (
	// ErrCorrupt marks an encoded policy that cannot be decoded.
	ErrCorrupt = errors.New("corrupt policy encoding")
	// ErrNewerVersion marks, besides ErrCorrupt, an encoding of a newer
	// format than this binary's (a version above its own, or a flag it
	// does not know): a newer floodgate wrote it, and the replicas of that
	// release read it. A state machine stops on it rather than refuse it
	// (package fsm), so as not to fall silently behind them.
	ErrNewerVersion = errors.New("encoded by a newer floodgate")
)

// Bounds on a policy.
const (
	// MaxLimits is the most limits one policy checks together.
	MaxLimits = 8
	// MaxNameLen bounds policy and limit names.
	MaxNameLen = 128
	// MaxSoftPercent bounds the overage of soft throttling.
	MaxSoftPercent = 1000
	// MaxKeyBy bounds the descriptors a policy keys by.
	MaxKeyBy = 8
)

// Mode is how a policy throttles. Stored in log entries: never renumber.
type Mode uint8

// The throttling modes.
const (
	// Hard denies above the limit.
	Hard Mode = 0
	// Soft admits up to SoftPercent above the limit.
	Soft Mode = 1
	// Shadow never denies; the answer says when it would have.
	Shadow Mode = 2
	// Elastic admits above the limit, up to its ceiling, while the
	// policy's cluster-wide admitted rate is under its capacity.
	Elastic Mode = 3
)

// Consistency is when a decision is answered. Stored in log entries.
type Consistency uint8

// The consistency levels.
const (
	// Strict answers once the decision is committed through Raft.
	Strict Consistency = 0
	// Fast answers from the leader's memory at once and replicates the
	// counted requests in batches.
	Fast Consistency = 1
)

// Limit is one limit of a policy with an optional name, reported as the
// limit that decided.
type Limit struct {
	Name string
	window.Limit
}

// Policy is a list of limits checked together for one key.
type Policy struct {
	// Name is the policy's name, empty for a request's inline limit. It
	// scopes the counters: two policies never share state.
	Name string
	// Limits are checked atomically: a request is admitted only when every
	// limit admits, and counted in every limit only then. Each has a
	// distinct window.
	Limits []Limit
	// Reduced, when set, is the limit that applies once Limits are
	// exhausted, instead of a hard stop (after 500/hour, 10/minute). Only
	// requests admitted through it are counted in it.
	Reduced *Limit
	// CountDenied counts denied requests too, in every limit checked, so
	// a client that keeps retrying stays throttled.
	CountDenied bool
	Mode        Mode
	// SoftPercent is how far above its limits a Soft policy admits.
	SoftPercent int64
	// ElasticCeilingPercent is how far an Elastic policy may stretch its
	// limits (200 doubles them) while the policy's cluster-wide admitted
	// rate is under ElasticCapacity (cost per second).
	ElasticCeilingPercent int64
	ElasticCapacity       int64
	Consistency           Consistency
	// KeyBy names the request descriptors that make up the key, in order
	// (for example user, ip); empty means the request gives its key.
	KeyBy []string
	// Colocate keeps every key of the policy in one slot (ColocatedKey),
	// so the checks of one request under it can form an atomic set.
	Colocate bool
}

// ColocatedKey is the key a check of p is counted under: key itself, or,
// when p colocates its keys, key behind a hash tag of p's name, so that
// every key of p hashes to the same slot (hashing.ShardOf reads only the
// tag). User keys never start with the tag's NUL byte (validation refuses
// them), so a tagged key never meets an untagged one.
func (p *Policy) ColocatedKey(key string) string {
	if p == nil || !p.Colocate {
		return key
	}
	return "\x00" + p.Name + "\x00" + key
}

// UserKey undoes ColocatedKey: the key a check of p counted under stored
// was made from, and whether stored is a key p's checks count under at
// all (behind p's own hash tag when p colocates its keys). Without an
// allocation: peers' forwarded checks are judged by it.
func (p *Policy) UserKey(stored string) (key string, ok bool) {
	if p == nil || !p.Colocate {
		return stored, true
	}
	n := len(p.Name)
	if len(stored) < n+2 || stored[0] != 0 || stored[n+1] != 0 || stored[1:n+1] != p.Name {
		return "", false
	}
	return stored[n+2:], true
}

// DisplayKey is the key as the request built it: ColocatedKey's tag, if
// any, removed.
func DisplayKey(key string) string {
	if len(key) > 0 && key[0] == 0 {
		if i := strings.IndexByte(key[1:], 0); i >= 0 {
			return key[i+2:]
		}
	}
	return key
}

// Outcome is what a decision did to the states, so it can be replayed
// exactly elsewhere (fast mode replicates outcomes, not requests).
type Outcome uint8

// The outcomes. Stored in log entries: never renumber.
const (
	// Denied counted nothing.
	Denied Outcome = 0
	// Admitted counted the cost in every limit.
	Admitted Outcome = 1
	// AdmittedReduced counted the cost in the reduced limit only.
	AdmittedReduced Outcome = 2
	// DeniedCounted counted the cost in every limit checked (CountDenied).
	DeniedCounted Outcome = 3
	// DeniedCountedReduced counted it in the limits and the reduced limit.
	DeniedCountedReduced Outcome = 4
)

// Result is the answer of a policy to one request.
type Result struct {
	// Allowed reports whether the request may go ahead (always, in Shadow).
	Allowed bool
	// WouldDeny reports, in Shadow mode, that enforcing would have denied.
	WouldDeny bool
	// Decider is the index of the limit that decided (len(Limits) for the
	// reduced limit): the one that denied (the longest wait when several
	// did), or the one with the least remaining when all admitted.
	Decider int
	// Limit and Remaining are the decider's (with Soft or Elastic,
	// against the stretched limit; Remaining at most Limit); ResetAt is
	// the latest of all limits. RetryAfter is how long until the same
	// request would be admitted: the decider's wait, or, when the reduced
	// limit decided a denial, the sooner of its wait and the limits'.
	Limit      int64
	Remaining  int64
	ResetAt    int64
	RetryAfter int64
	// ResetAfter is how long from the decision until the deciding limit
	// (the one Limit and Remaining are of) is back to full capacity, after
	// what was counted: a duration, which a client can use without its
	// clock agreeing with the leader's.
	ResetAfter int64
	// Outcome is what the decision counted.
	Outcome Outcome
}

// States is the number of states a check of p touches: one per limit, and
// one for the reduced limit.
func (p *Policy) States() int {
	if p.Reduced != nil {
		return len(p.Limits) + 1
	}
	return len(p.Limits)
}

// Evaluate answers a request of cost at time now and counts it as its
// outcome says. states[i] is the state of Limits[i] for the request's key
// and states[len(Limits)] that of the reduced limit. elastic reports
// whether the policy's cluster-wide rate leaves room to stretch (used only
// by Elastic policies).
func (p *Policy) Evaluate(states []*window.State, now, cost int64, elastic bool) Result {
	res := p.Decide(states, now, cost, elastic)
	p.Count(states, now, cost, elastic, &res)
	return res
}

// Decide answers a request of cost at time now without counting it: the
// first half of Evaluate. Count completes the answer. A caller deciding
// several requests all or nothing (an atomic set) decides each, turns the
// admitted ones into denials with Refuse when one is denied, then counts
// each. Decide may drop parts of states that aged out (window.Check).
func (p *Policy) Decide(states []*window.State, now, cost int64, elastic bool) Result {
	var ds [MaxLimits]window.Decision
	res := Result{Allowed: true, Decider: -1}
	stretch := p.stretch(elastic)
	for i := range p.Limits {
		l := scaled(&p.Limits[i].Limit, stretch)
		d := l.Check(states[i], now, cost)
		ds[i] = d
		res.ResetAt = max(res.ResetAt, d.ResetAt)
		if !d.Allowed {
			if res.Allowed || d.RetryAfter > ds[res.Decider].RetryAfter {
				res.Decider = i
			}
			res.Allowed = false
			continue
		}
		if res.Allowed && (res.Decider < 0 || d.Remaining < ds[res.Decider].Remaining) {
			res.Decider = i
		}
	}
	d, lim := ds[res.Decider], scaled(&p.Limits[res.Decider].Limit, stretch).Limit
	switch {
	case res.Allowed:
		res.Outcome = Admitted
	case p.Reduced != nil:
		r := len(p.Limits)
		rd := p.Reduced.Check(states[r], now, cost)
		res.ResetAt = max(res.ResetAt, rd.ResetAt)
		if rd.Allowed {
			res.Allowed, res.Outcome = true, AdmittedReduced
		} else {
			if p.CountDenied {
				res.Outcome = DeniedCountedReduced
			}
			rd.RetryAfter = p.reducedRetry(d.RetryAfter, rd.RetryAfter, cost, stretch)
		}
		res.Decider, d, lim = r, rd, p.Reduced.Limit.Limit
	case p.CountDenied:
		res.Outcome = DeniedCounted
	}
	// Remaining is at most the limit: a token bucket or GCRA whose burst
	// exceeds its limit may hold more than one window's refill, but "3 of
	// 2 remaining" reads as a bug, and RateLimit headers and Envoy pair
	// the limit with the window (q=2;w=60 is the rate, not the burst).
	res.Limit, res.Remaining, res.RetryAfter = lim, min(d.Remaining, lim), d.RetryAfter
	return res
}

// wait is how long from now until a request of cost is admitted, with
// states as they are and nothing more counted: when every limit admits
// it, or, with a reduced limit, when that does if it is sooner. 0 if it
// is admitted now.
func (p *Policy) wait(states []*window.State, now, cost int64, elastic bool) int64 {
	stretch := p.stretch(elastic)
	var main int64
	for i := range p.Limits {
		l := scaled(&p.Limits[i].Limit, stretch)
		if d := l.Check(states[i], now, cost); !d.Allowed {
			main = max(main, d.RetryAfter)
		}
	}
	if main == 0 || p.Reduced == nil {
		return main
	}
	rd := p.Reduced.Check(states[len(p.Limits)], now, cost)
	if rd.Allowed {
		return 0
	}
	return p.reducedRetry(main, rd.RetryAfter, cost, stretch)
}

// reducedRetry is the wait of a request both the limits (wait main) and
// the reduced limit (wait reduced) deny: the same request is admitted by
// whichever admits it first, and the limits, once they admit again, take
// it before the reduced limit is asked. A wait only counts if that side
// can ever admit the cost: the reduced limit is not held to the request's
// cost (ValidateCost), and an elastic policy's limits without room may not
// be; a window's wait for a cost it can never admit is only when it is
// full again. When neither can, the reduced limit's wait stands.
func (p *Policy) reducedRetry(main, reduced, cost, stretch int64) int64 {
	c := max(cost, 1) // a peek waits as a request of cost 1 would
	mainFits := true
	for i := range p.Limits {
		if c > scaled(&p.Limits[i].Limit, stretch).Capacity() {
			mainFits = false
		}
	}
	switch {
	case !mainFits:
		return reduced
	case c > p.Reduced.Limit.Capacity():
		return main
	}
	return min(main, reduced)
}

// Refuse turns a decision of cost that admitted into a denial because
// another request of its atomic set was denied: it counts as a denial of
// this policy would (in every limit with CountDenied, else nowhere, and
// then Remaining is the cost the request would have used, given back),
// and asks to retry after retryAfter, the wait of the request that was
// denied. A decision that already denied is left alone.
func (p *Policy) Refuse(res *Result, cost, retryAfter int64) {
	if !res.Allowed {
		return
	}
	res.Allowed, res.RetryAfter, res.Outcome = false, max(retryAfter, 1), Denied
	if !p.CountDenied {
		res.Remaining = min(res.Remaining+cost, res.Limit) // at most the limit, as Decide says
	} else {
		res.Outcome = DeniedCounted
		if res.Decider == len(p.Limits) {
			res.Outcome = DeniedCountedReduced
		}
	}
}

// Count counts what res (from Decide, possibly Refused) says at now and
// completes it: a peek (cost 0) counts nothing, Shadow admits what it
// would have denied, and ResetAfter is read after the counting.
func (p *Policy) Count(states []*window.State, now, cost int64, elastic bool, res *Result) {
	if cost == 0 {
		res.Outcome = Denied // a peek counts nothing
	} else if res.Outcome != Denied {
		res.ResetAt = max(res.ResetAt, p.Record(states, now, cost, res.Outcome, elastic))
		if res.Outcome == DeniedCounted || res.Outcome == DeniedCountedReduced {
			// The denial just counted pushes its own retry back (a
			// bucket's debt, a newer timestamp in a log): the wait read
			// before it would deny the client that waits it out, and
			// count that denial too, again and again. Read after it.
			// (A request refused only for its atomic set may fit at
			// once: allOrNothing gives it the set's wait.)
			if w := p.wait(states, now, cost, elastic); w > 0 {
				res.RetryAfter = w
			}
		}
	}
	if !res.Allowed && p.Mode == Shadow {
		res.Allowed, res.WouldDeny = true, true
	}
	// The deciding limit's reset after what was just counted (a check at
	// cost 0 counts nothing and changes no answer).
	var l window.Limit
	if res.Decider < len(p.Limits) {
		l = scaled(&p.Limits[res.Decider].Limit, p.stretch(elastic))
	} else {
		l = p.Reduced.Limit // never stretched
	}
	res.ResetAfter = max(0, l.Check(states[res.Decider], now, 0).ResetAt-now)
}

// Record counts cost at now as outcome says and returns when the touched
// states will be back to full capacity. Evaluate calls it for its own
// decisions; fast mode calls it to replay decisions made on the leader,
// with the elastic judgment the decision was made with.
//
// The limits are counted stretched exactly as Evaluate checked them (Soft
// always, Elastic when elastic), a sliding log at the most it is ever
// read at (it keeps up to that limit's timestamps), and a token bucket or
// GCRA takes its tokens at the stretched refill rate, so a soft 10% limit
// of 10 admits 11, not 10 (log) or every request (bucket). The reduced
// limit is never stretched.
func (p *Policy) Record(states []*window.State, now, cost int64, outcome Outcome, elastic bool) int64 {
	var reset int64
	rec := func(l window.Limit, s *window.State) {
		l.Record(s, now, cost)
		reset = max(reset, l.Expiry(s))
	}
	if outcome == Admitted || outcome == DeniedCounted || outcome == DeniedCountedReduced {
		stretch := p.stretch(elastic)
		for i := range p.Limits {
			l, s := &p.Limits[i].Limit, stretch
			if l.Algorithm == window.SlidingLog {
				// A log keeps only its limit's newest timestamps: kept at
				// the unstretched limit, an elastic policy without room
				// forgets the ones it needs once room returns (20 of a
				// ceiling of 20, then 10 more). Keep the most it is read
				// at; at any lower limit the answers are the same.
				s = p.stretch(true)
			}
			rec(scaled(l, s), states[i])
		}
	}
	if (outcome == AdmittedReduced || outcome == DeniedCountedReduced) && p.Reduced != nil {
		rec(p.Reduced.Limit, states[len(p.Limits)])
	}
	return reset
}

// stretch is the percentage the limits are evaluated at: 100, or more for
// Soft, and for Elastic while there is room.
// HeapBound is the most state i of p (Limits, then the reduced limit's)
// can hold after a check of cost is counted on it at now or later:
// Limit.HeapBound of the limit Record counts it at (a sliding log at the
// most it is read at).
func (p *Policy) HeapBound(i int, s *window.State, now, cost int64) int {
	if i >= len(p.Limits) {
		return p.Reduced.Limit.HeapBound(s, now, cost)
	}
	l := &p.Limits[i].Limit
	if l.Algorithm == window.SlidingLog {
		sl := scaled(l, p.stretch(true))
		return sl.HeapBound(s, now, cost)
	}
	return l.HeapBound(s, now, cost)
}

// HeapMax is the most state i of p can ever hold, whatever is counted on
// it (Limit.HeapMax of the limit Record counts it at).
func (p *Policy) HeapMax(i int) int {
	if i >= len(p.Limits) {
		return p.Reduced.Limit.HeapMax()
	}
	l := &p.Limits[i].Limit
	if l.Algorithm == window.SlidingLog {
		sl := scaled(l, p.stretch(true))
		return sl.HeapMax()
	}
	return l.HeapMax()
}

func (p *Policy) stretch(elastic bool) int64 {
	switch {
	case p.Mode == Soft:
		return 100 + p.SoftPercent
	case p.Mode == Elastic && elastic:
		return p.ElasticCeilingPercent
	}
	return 100
}

// scaled returns l with its limit (and burst) stretched to pct percent.
// A state's identity leaves the limit's value out, so the same state
// serves every stretch (counts are counts; a bucket's state is the time it
// is full again, read at the stretched rate), provided it is recorded with
// the stretch it was checked with (Record).
// It returns a copy, not a pointer to one, so nothing is allocated.
func scaled(l *window.Limit, pct int64) window.Limit {
	s := *l
	if pct != 100 {
		s.Limit = min(window.MaxLimit, max(1, l.Limit*pct/100))
		if s.Burst > 0 {
			s.Burst = min(window.MaxLimit, max(1, l.Burst*pct/100))
		}
	}
	return s
}

// WindowOf returns the window, in nanoseconds, of the limit that decided
// r (0 for a calendar window or when none did).
func (p *Policy) WindowOf(r Result) int64 {
	switch {
	case r.Decider == len(p.Limits) && p.Reduced != nil:
		return p.Reduced.Limit.Window
	case r.Decider >= 0 && r.Decider < len(p.Limits):
		return p.Limits[r.Decider].Limit.Window
	}
	return 0
}

// DecisionLabels lists every name DecidedBy can give a result of p: the
// decision series a policy's answers can be counted under.
func (p *Policy) DecisionLabels() []string {
	out := []string{""}
	for i := range p.Limits {
		out = append(out, p.DecidedBy(Result{Decider: i}))
	}
	if p.Reduced != nil {
		out = append(out, p.DecidedBy(Result{Decider: len(p.Limits)}))
	}
	return out
}

// DecidedBy names the limit that decided a result: its name, or its place.
func (p *Policy) DecidedBy(r Result) string {
	switch {
	case r.Decider == len(p.Limits) && p.Reduced != nil:
		if p.Reduced.Name != "" {
			return p.Reduced.Name
		}
		return "reduced"
	case r.Decider >= 0 && r.Decider < len(p.Limits):
		if n := p.Limits[r.Decider].Name; n != "" {
			return n
		}
		// A constant table, not formatting: this runs on every answer.
		return [MaxLimits]string{"limits[0]", "limits[1]", "limits[2]", "limits[3]",
			"limits[4]", "limits[5]", "limits[6]", "limits[7]"}[r.Decider]
	}
	return ""
}
