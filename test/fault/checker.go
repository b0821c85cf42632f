package fault

import (
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Spec says what a scenario's history must satisfy.
type Spec struct {
	Limit int64
	// Linearizable: each key's history must pass CounterModel (strict, and
	// fast without failover).
	Linearizable bool
	// Slack is how far the keys of one shard may together be admitted above
	// their limits, and how much of what they admitted may be lost: fast
	// mode's bound, 2 × (--fast-max-pending + the largest cost of a check)
	// per failover of the shard. Zero
	// means exact.
	Slack int64
	// LinTimeout bounds the porcupine search per key.
	LinTimeout time.Duration
	// VisualDir receives porcupine visualizations of failed checks.
	VisualDir string
	// LoadEnd, if set, is when the load stopped: answers after it (the
	// final reads, once the harness has let the cluster settle) do not
	// count toward the longest gap, which is the service's, not the
	// harness's pause, and calls made after it do not show a fault
	// healed.
	LoadEnd time.Duration
	// Recovery bounds how soon the hot shard must answer again after a
	// fault with no bound of its own (Fault.Within); 0: none.
	Recovery time.Duration
	// MinAnswered is how many calls each key must have answered (allowed
	// or denied) during the load: a scenario whose load never reached the
	// cluster would pass every check.
	MinAnswered int
	// RunOut are keys the load spends past their limit: each must have
	// been denied, or no admission past the limit was ever tried.
	RunOut []string
	// Keys are the scenario's keys: each must be in the history (a key no
	// call reached escapes every per-key check).
	Keys []string
}

// KeyReport is what one key's history shows.
type KeyReport struct {
	Key                       string
	Shard                     int
	Ops, Allowed, Denied, Unk int
	Admitted                  int64          // cost of the calls answered allowed
	Ambiguous                 []int64        // costs of the failed non-peek calls
	Final                     int64          // used at the end (limit − remaining of the last peek); -1 unread
	Errors                    map[string]int // failed calls by error
	Lin                       porcupine.CheckResult
	Visual                    string
}

// Report is the verdict on one scenario.
type Report struct {
	Name       string
	Duration   time.Duration
	Keys       []KeyReport
	Faults     []Fault
	Failovers  []time.Duration // per fault: until the hot shard answered again
	LongestGap time.Duration   // between answers on the hot shard
	GapEnd     time.Duration   // when the longest gap ended
	NotSent    int             // calls that failed to dial
	Refused    int             // calls a starting node refused
	Violations []string
}

// Check evaluates ops against spec. shardOf maps a key to its shard; hot is
// the shard the faults target; final maps a key to the used count read at
// the end (limit − remaining), if read.
func Check(name string, ops []Op, faults []Fault, spec Spec, shardOf func(string) int, hot int, final map[string]int64) Report {
	r := Report{Name: name, Faults: faults}
	if len(ops) > 0 {
		r.Duration = ops[len(ops)-1].Ret - ops[0].Call
	}
	over := map[int]int64{} // per shard: admitted above the limits
	byKey := ByKey(ops)
	for _, key := range spec.Keys {
		if len(byKey[key]) == 0 {
			r.violate("%s: no call recorded", key)
		}
	}
	for key, kops := range byKey {
		kr := KeyReport{Key: key, Shard: shardOf(key), Ops: len(kops), Final: -1, Lin: porcupine.Ok}
		if f, ok := final[key]; ok {
			kr.Final = f
		}
		for _, o := range kops {
			switch o.Outcome {
			case Allowed:
				kr.Allowed++
				kr.Admitted += o.Cost
			case Denied:
				kr.Denied++
			case Unknown:
				if o.Invalid {
					r.violate("%s: a valid check refused: %s", key, o)
				}
				kr.Unk++
				if kr.Errors == nil {
					kr.Errors = map[string]int{}
				}
				kr.Errors[o.Err]++
				if o.Cost > 0 {
					kr.Ambiguous = append(kr.Ambiguous, o.Cost)
				}
			}
		}
		if spec.Linearizable {
			lr := CheckLinearizable(key, kops, spec.Limit, spec.LinTimeout, spec.VisualDir)
			kr.Lin, kr.Visual = lr.Result, lr.Visual
			switch lr.Result {
			case porcupine.Illegal:
				r.violate("%s: history not linearizable (%d ops; %s)%s", key, len(kops), firstBad(kops, spec.Limit), visual(lr.Visual))
			case porcupine.Unknown:
				r.violate("%s: linearizability undecided within %s (%d ops)", key, spec.LinTimeout, len(kops))
			}
		}
		if kr.Admitted > spec.Limit {
			over[kr.Shard] += kr.Admitted - spec.Limit
			if spec.Slack == 0 {
				r.violate("%s: admitted %d, limit %d (%d calls allowed, %d denied, %d unknown)", key, kr.Admitted, spec.Limit, kr.Allowed, kr.Denied, kr.Unk)
			}
		}
		r.checkFinal(kr, spec)
		if slices.Contains(spec.RunOut, key) && kr.Denied == 0 {
			r.violate("%s: never denied, so its limit was never reached and no over-admission tried", key)
		}
		if answered := answeredIn(kops, spec.LoadEnd); answered < spec.MinAnswered {
			r.violate("%s: %d calls answered during the load, want %d at least", key, answered, spec.MinAnswered)
		}
		r.Keys = append(r.Keys, kr)
	}
	slices.SortFunc(r.Keys, func(a, b KeyReport) int { return cmpString(a.Key, b.Key) })
	if spec.Slack > 0 {
		for shard, o := range over {
			if o > spec.Slack {
				r.violate("shard %d: its keys admitted %d above their limits, bound %d", shard, o, spec.Slack)
			}
		}
	}
	r.Failovers, r.LongestGap, r.GapEnd = failovers(ops, faults, shardOf, hot, spec.LoadEnd)
	for i, f := range faults {
		within, split := f.Within, ""
		if within == 0 {
			within = spec.Recovery
		} else if f.Elections > 1 {
			within += splitVoteAllowance
			split = fmt.Sprintf(" (%d elections: a split vote)", f.Elections)
		}
		switch {
		case r.Failovers[i] < 0:
			r.violate("shard %d never answered again after %s", hot, f)
		case within > 0 && r.Failovers[i] > within:
			r.violate("shard %d answered again only %s after %s, want within %s%s", hot, r.Failovers[i].Round(time.Millisecond), f, within, split)
		}
	}
	return r
}

// answeredIn counts the calls of ops made before loadEnd (all with 0) that
// the cluster answered.
func answeredIn(ops []Op, loadEnd time.Duration) int {
	n := 0
	for _, o := range ops {
		if o.Outcome != Unknown && (loadEnd == 0 || o.Call < loadEnd) {
			n++
		}
	}
	return n
}

// checkFinal: what the cluster counted is what it admitted plus some of
// the calls that failed; with slack, up to slack of the admitted may be
// lost.
func (r *Report) checkFinal(kr KeyReport, spec Spec) {
	if kr.Final < 0 {
		r.violate("%s: final count never read", kr.Key)
		return
	}
	if spec.Slack > 0 {
		hi := kr.Admitted
		for _, c := range kr.Ambiguous {
			hi += c
		}
		if kr.Final < min(kr.Admitted, spec.Limit)-spec.Slack || kr.Final > min(hi, spec.Limit+spec.Slack) {
			r.violate("%s: final count %d, admitted %d (+ up to %d unknown), slack %d", kr.Key, kr.Final, kr.Admitted, hi-kr.Admitted, spec.Slack)
		}
		return
	}
	if kr.Admitted > spec.Limit {
		return // reported already; the count cannot be read above the limit
	}
	if !subsetSum(kr.Ambiguous, kr.Final-kr.Admitted) {
		r.violate("%s: final count %d is not admitted %d plus a subset of the unknown costs %v", kr.Key, kr.Final, kr.Admitted, kr.Ambiguous)
	}
}

// subsetSum reports whether some subset of costs sums to target.
func subsetSum(costs []int64, target int64) bool {
	if target < 0 {
		return false
	}
	reach := make([]bool, target+1)
	reach[0] = true
	for _, c := range costs {
		for s := target; s >= c; s-- {
			reach[s] = reach[s] || reach[s-c]
		}
	}
	return reach[target]
}

// failovers returns, per fault, how long after it the hot shard answered a
// call invoked after it and before loadEnd (-1 never; 0: any call), and
// the longest gap between answers on the hot shard up to loadEnd and when
// it ended.
func failovers(ops []Op, faults []Fault, shardOf func(string) int, hot int, loadEnd time.Duration) ([]time.Duration, time.Duration, time.Duration) {
	out := make([]time.Duration, len(faults))
	var answered []Op
	for _, o := range ops {
		if o.Outcome != Unknown && shardOf(o.Key) == hot && (loadEnd == 0 || o.Call < loadEnd) {
			answered = append(answered, o)
		}
	}
	for i, f := range faults {
		out[i] = -1
		for _, o := range answered {
			if o.Call >= f.At && (out[i] < 0 || o.Ret-f.At < out[i]) {
				out[i] = o.Ret - f.At
			}
		}
	}
	slices.SortFunc(answered, func(a, b Op) int { return int(a.Ret - b.Ret) })
	var gap, end time.Duration
	for i := 1; i < len(answered) && (loadEnd == 0 || answered[i].Ret <= loadEnd); i++ {
		if d := answered[i].Ret - answered[i-1].Ret; d > gap {
			gap, end = d, answered[i].Ret
		}
	}
	return out, gap, end
}

// firstBad names the first answered call whose remaining is impossible
// in any order: above what the calls allowed before it was invoked leave,
// or below what every call invoked before it returned could have used. It
// is a hint for the report; porcupine decides.
func firstBad(ops []Op, limit int64) string {
	for i, o := range ops {
		if o.Outcome == Unknown {
			continue
		}
		var lo, hi int64 // bounds on what was used before o took effect
		for j, p := range ops {
			if j == i || p.Outcome == Denied {
				continue
			}
			if p.Outcome == Allowed && p.Ret < o.Call {
				lo += p.Cost
			}
			if p.Call < o.Ret {
				hi += p.Cost
			}
		}
		own := int64(0)
		if o.Outcome == Allowed {
			own = o.Cost
		}
		if rem := o.Remaining + own; rem > limit-lo || rem < limit-hi {
			return fmt.Sprintf("e.g. %s, when between %d and %d were used", o, lo, hi)
		}
	}
	return "see the visualization"
}

func visual(path string) string {
	if path == "" {
		return ""
	}
	return "; visualization " + path
}

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
