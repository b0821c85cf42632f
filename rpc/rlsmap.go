package rpc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// Envoy's rate limit service (RLS v3) mapped onto floodgate's policies.
//
// A request names a domain and a list of descriptors, each an ordered list
// of (key, value) entries. A descriptor is checked under the first policy
// that exists, and with key_by names exactly its entries' keys, of:
//
//   - "<domain>.<key1>.<key2>…", its entries' keys joined by dots, then
//   - "<domain>",
//
// keyed by its entries as descriptors (so key_by and escaping apply). A
// descriptor's own limit override replaces the policy's limits (a policy
// of one limit, the policy's first algorithm); with no policy it is a
// fixed window, as envoyproxy/ratelimit counts, under the domain's name.
// A descriptor neither finds is not limited: OK with no current limit, as
// envoyproxy/ratelimit answers a descriptor no rule matches.
//
// The cost is the descriptor's hits_addend when set (0 peeks), else the
// request's hits_addend, else 1 (Envoy leaves it 0 for "one hit"). A cost
// above what the descriptor's limits admit at once is over the limit, not
// an error: Envoy lets a request whose check failed through under
// failure_mode_deny: false, so an error would admit the largest requests.
// For the same reason a value too long for a key is counted under its
// digest (digestLongValues), an entry key floodgate's names cannot hold
// under the key's (digestOddNames), and a key too long even so under the
// digest of the whole key (validate.DigestedEntriesKey).

// rlsSize refuses a request of no descriptors or of more than a batch.
func rlsSize(req *rlsv3.RateLimitRequest) error {
	switch n := len(req.GetDescriptors()); {
	case n == 0:
		return fmt.Errorf("%w: descriptors: must not be empty", validate.ErrInvalid)
	case n > validate.MaxBatch:
		return fmt.Errorf("%w: descriptors: %d given, at most %d", validate.ErrInvalid, n, validate.MaxBatch)
	}
	return nil
}

// rlsChecks validates req and turns each descriptor into a check, with a
// nil Policy when nothing limits the descriptor; policyOf finds a policy
// by name (nil when there is none). tooBig[i] marks a descriptor whose
// cost is more than its limits admit at once: its check is a peek (cost
// 0), to be answered over the limit. The error names the field at fault.
func rlsChecks(req *rlsv3.RateLimitRequest, policyOf func(string) *policy.Policy, maxLog int64) (checks []fsm.Check, tooBig []bool, err error) {
	if req.GetDomain() == "" {
		return nil, nil, fmt.Errorf("%w: domain: must not be empty", validate.ErrInvalid)
	}
	if err := rlsSize(req); err != nil {
		return nil, nil, err
	}
	checks = make([]fsm.Check, len(req.GetDescriptors()))
	tooBig = make([]bool, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		field := fmt.Sprintf("descriptors[%d].", i)
		if checks[i], tooBig[i], err = rlsDescriptor(req, d, field, policyOf, maxLog); err != nil {
			return nil, nil, err
		}
	}
	return checks, tooBig, nil
}

func rlsDescriptor(req *rlsv3.RateLimitRequest, d *rlcommon.RateLimitDescriptor, field string,
	policyOf func(string) *policy.Policy, maxLog int64) (c fsm.Check, tooBig bool, err error) {
	if len(d.GetEntries()) == 0 {
		return fsm.Check{}, false, fmt.Errorf("%w: %sentries: must not be empty", validate.ErrInvalid, field)
	}
	if d.GetIsNegativeHits() {
		return fsm.Check{}, false, fmt.Errorf("%w: %sis_negative_hits: floodgate does not give hits back", validate.ErrInvalid, field)
	}
	entries := make(map[string]string, len(d.GetEntries()))
	keys := make([]string, len(d.GetEntries()))
	for j, e := range d.GetEntries() {
		switch _, dup := entries[e.GetKey()]; {
		case e.GetKey() == "":
			return fsm.Check{}, false, fmt.Errorf("%w: %sentries[%d].key: must not be empty", validate.ErrInvalid, field, j)
		case dup:
			return fsm.Check{}, false, fmt.Errorf("%w: %sentries[%d].key: %q given twice", validate.ErrInvalid, field, j, e.GetKey())
		}
		entries[e.GetKey()], keys[j] = e.GetValue(), e.GetKey()
	}
	cost := int64(1)
	if req.GetHitsAddend() > 0 {
		cost = int64(req.GetHitsAddend())
	}
	if h := d.GetHitsAddend(); h != nil {
		cost = int64(min(h.GetValue(), math.MaxInt32+1)) // more than any limit: over the limit below
	}
	p := rlsPolicy(req.GetDomain(), keys, policyOf)
	if o := d.GetLimit(); o != nil {
		l, err := overrideLimit(o, p, field+"limit.", maxLog)
		if err != nil {
			return fsm.Check{}, false, err
		}
		q := &policy.Policy{Name: req.GetDomain(), Limits: []policy.Limit{{Limit: l}}}
		if p != nil {
			q = clonePolicy(p)
			q.Limits, q.Reduced = []policy.Limit{{Name: p.Limits[0].Name, Limit: l}}, nil
		}
		// The override makes a policy of its own, checked whole like any
		// other before anything is counted: a domain that cannot name a
		// policy, or a limit the policy's mode stretches past the nodes'
		// cap, would otherwise reach the log and be refused there.
		if err := q.Validate(maxLog); err != nil && !logAsCounter(q, maxLog) {
			return fsm.Check{}, false, fmt.Errorf("%w: %s", validate.ErrInvalid, overrideError(q, p == nil, field, err))
		}
		p = q
	}
	if p == nil {
		return fsm.Check{}, false, nil // not limited
	}
	digestOddNames(entries)
	key, err := validate.EntriesKey(entries, p, field)
	if err != nil && digestLongValues(entries) {
		key, err = validate.EntriesKey(entries, p, field)
	}
	if err != nil {
		key, err = validate.DigestedEntriesKey(entries, p, field)
	}
	if err != nil {
		return fsm.Check{}, false, err // names descriptors[i].entries
	}
	if p.ValidateCost(cost) != nil { // never negative: more than the limits admit at once
		return fsm.Check{Key: key, Policy: p}, true, nil
	}
	return fsm.Check{Key: key, Policy: p, Cost: cost}, false, nil
}

// rlsPolicy is the policy a descriptor of these entry keys is checked
// under: the first of "<domain>.<keys>" and "<domain>" that exists and can
// key it, nil when neither does. A policy with key_by keys only
// descriptors of exactly its key_by names; one of other keys is one its
// rule does not match, as envoyproxy/ratelimit answers it (not limited),
// not an error: Envoy sends every descriptor of a route and its virtual
// host in one request, and a refusal of one (say a vhost's generic_key
// under a domain policy keyed by user) failed the whole request, so under
// failure_mode_deny: false none of its descriptors was limited.
func rlsPolicy(domain string, keys []string, policyOf func(string) *policy.Policy) *policy.Policy {
	for _, name := range [2]string{domain + "." + strings.Join(keys, "."), domain} {
		if p := policyOf(name); p != nil && keysBy(p, keys) {
			return p
		}
	}
	return nil
}

// keysBy reports whether p keys a descriptor of these (distinct) entry
// keys: any keys without key_by, else exactly its key_by names.
func keysBy(p *policy.Policy, keys []string) bool {
	if len(p.KeyBy) == 0 {
		return true
	}
	if len(p.KeyBy) != len(keys) {
		return false
	}
	for _, k := range p.KeyBy {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

// overrideError names the part of an RLS request at fault when the policy
// its limit override makes is invalid: the domain when the override's
// policy is named after it (no stored policy), else the override, with the
// stored policy it stretches.
func overrideError(q *policy.Policy, ownName bool, field string, err error) string {
	var fe *window.FieldError
	if !errors.As(err, &fe) {
		return fmt.Sprintf("%slimit: %v", field, err)
	}
	if ownName && fe.Field == "name" {
		return "domain: " + fe.Msg
	}
	return fmt.Sprintf("%slimit: %s (under policy %s)", field, fe.Msg, q.Name)
}

// digestLen is the length of a value's digest: "sha256:" and 64 hex digits.
const digestLen = len("sha256:") + 2*sha256.Size

// digestLongValues replaces each value of entries longer than a digest by
// its SHA-256, "sha256:<hex>", and reports whether it replaced any. Envoy
// sends what a request carries (a header, the path): a key too long to
// count must still be counted, since an error would let the request
// through under failure_mode_deny: false. The same value always makes the
// same key, so a long value is limited like any other.
func digestLongValues(entries map[string]string) bool {
	changed := false
	for k, v := range entries {
		if len(v) > digestLen {
			entries[k], changed = digest(v), true
		}
	}
	return changed
}

// digestOddNames replaces each entry key of entries that floodgate's
// descriptor names cannot hold (a character other than letters, digits
// and _.:-, or too long) by its SHA-256. Envoy's descriptor keys are its
// configuration's to choose ("x-user/id", Envoy Gateway's route names):
// refusing them would let every request through under failure_mode_deny:
// false. The same key always makes the same name, so its descriptors are
// counted like any other; no policy's key_by can name it.
func digestOddNames(entries map[string]string) {
	var odd []string
	for k := range entries {
		if !policy.ValidName(k) || len(k) > validate.MaxKeyLen {
			odd = append(odd, k)
		}
	}
	for _, k := range odd {
		entries[digest(k)] = entries[k]
		delete(entries, k)
	}
}

// digest is s's SHA-256 as a key part: "sha256:<hex>".
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// clonePolicy copies p so an override never changes the shared policy.
func clonePolicy(p *policy.Policy) *policy.Policy {
	q := *p
	q.Limits = append([]policy.Limit(nil), p.Limits...)
	q.KeyBy = append([]string(nil), p.KeyBy...)
	return &q
}

// overrideLimit turns a descriptor's limit override into a limit: the
// policy's first algorithm (a fixed window without one, or for calendar
// units: months and years are UTC calendar periods; a sliding counter for
// a sliding log longer than maxLog, see logAsCounter).
func overrideLimit(o *rlcommon.RateLimitDescriptor_RateLimitOverride, p *policy.Policy, field string, maxLog int64) (window.Limit, error) {
	if o.GetRequestsPerUnit() == 0 {
		return window.Limit{}, fmt.Errorf("%w: %srequests_per_unit: must be at least 1", validate.ErrInvalid, field)
	}
	mult := int64(1)
	if m := o.GetUnitMultiplier(); m != nil {
		if m.GetValue() == 0 {
			return window.Limit{}, fmt.Errorf("%w: %sunit_multiplier: must be at least 1", validate.ErrInvalid, field)
		}
		mult = int64(m.GetValue())
	}
	l := window.Limit{Algorithm: window.FixedWindow, Limit: int64(o.GetRequestsPerUnit())}
	if p != nil && len(p.Limits) > 0 {
		l.Algorithm = p.Limits[0].Limit.Algorithm
		l.Burst = scaleBurst(p.Limits[0].Limit.Burst, p.Limits[0].Limit.Limit, l.Limit)
		if l.Algorithm == window.SlidingCounter || l.Algorithm == window.SlidingCounterWeighted {
			l.Buckets = p.Limits[0].Limit.Buckets
		}
	}
	var unit time.Duration
	switch o.GetUnit() {
	case typev3.RateLimitUnit_SECOND:
		unit = time.Second
	case typev3.RateLimitUnit_MINUTE:
		unit = time.Minute
	case typev3.RateLimitUnit_HOUR:
		unit = time.Hour
	case typev3.RateLimitUnit_DAY:
		unit = 24 * time.Hour
	case typev3.RateLimitUnit_MONTH, typev3.RateLimitUnit_YEAR:
		if mult != 1 {
			return window.Limit{}, fmt.Errorf("%w: %sunit_multiplier: only 1 with a calendar unit", validate.ErrInvalid, field)
		}
		l = window.Limit{Algorithm: window.FixedWindow, Limit: l.Limit, Calendar: window.CalendarMonth}
		if o.GetUnit() == typev3.RateLimitUnit_YEAR {
			l.Calendar = window.CalendarYear
		}
		return l, overrideField(field, l.Validate(maxLog))
	default:
		return window.Limit{}, fmt.Errorf("%w: %sunit: %v is not a unit floodgate counts", validate.ErrInvalid, field, o.GetUnit())
	}
	if mult > window.MaxWindow/int64(unit) {
		return window.Limit{}, fmt.Errorf("%w: %sunit_multiplier: %d %s is longer than the longest window, %s", validate.ErrInvalid, field, mult, unitName(o.GetUnit()), time.Duration(window.MaxWindow))
	}
	l.Window = mult * int64(unit)
	if l.Burst > 0 {
		// A burst scaled from a tiny policy limit to a long window could
		// take longer to refill than any bucket may: the most that may.
		if most := maxCapacity(l.Limit, l.Window); l.Burst > most {
			l.Burst = most
		}
	}
	if l.Buckets != 0 && l.Window%int64(l.Buckets) != 0 {
		l.Buckets = 0 // the policy's buckets do not divide this window
	}
	if (l.Algorithm == window.SlidingCounter || l.Algorithm == window.SlidingCounterWeighted) &&
		l.Buckets == 0 && l.Window%window.DefaultBuckets != 0 {
		// Nor do the default 60 (a second): the default for this window
		// is spelled out, so that a node of an older release, which reads
		// 0 as 60 and would refuse the entry, applies what this one does.
		// The unit is Envoy's to choose, and refusing it would let the
		// request through under failure_mode_deny: false.
		l.Buckets = window.DefaultBucketsFor(l.Window)
	}
	if l.Algorithm == window.SlidingLog && l.Validate(maxLog) != nil {
		if c := counterOf(l); c.Validate(maxLog) == nil {
			l = c // see logAsCounter
		}
	}
	return l, overrideField(field, l.Validate(maxLog))
}

// counterOf is the sliding counter of l's limit and window.
func counterOf(l window.Limit) window.Limit {
	return window.Limit{Algorithm: window.SlidingCounter, Limit: l.Limit, Window: l.Window, Buckets: window.DefaultBucketsFor(l.Window)}
}

// logAsCounter makes the override policy q, whose sliding log is longer
// than --max-log-length (or than it once soft or elastic mode stretches
// it), a sliding counter of the same limit and window, and reports
// whether q is valid so. The override is Envoy's (per-tenant plans in
// dynamic metadata): refused, it failed the whole request, so under
// failure_mode_deny: false none of its descriptors was limited; a sliding
// counter is what the cap's own error points to.
func logAsCounter(q *policy.Policy, maxLog int64) bool {
	l := q.Limits[0].Limit
	if l.Algorithm != window.SlidingLog {
		return false
	}
	q.Limits[0].Limit = counterOf(l)
	if q.Validate(maxLog) != nil {
		q.Limits[0].Limit = l
		return false
	}
	return true
}

// scaleBurst keeps a policy's burst in proportion to its limit under an
// override of that limit: a token bucket that holds twice its policy's
// limit holds twice the override's, so an override that lowers the rate
// lowers the burst too (kept as it was, a burst of 200 over an override
// of 10 a minute admitted 200 at once) and one that raises it raises the
// burst. Rounded up, at least 1, at most window.MaxLimit; 0 (the
// algorithm's default) stays 0.
func scaleBurst(burst, from, to int64) int64 {
	if burst <= 0 || from <= 0 {
		return 0
	}
	// burst and to are at most window.MaxLimit (1e9): the product fits.
	b := (burst*to + from - 1) / from
	return min(max(b, 1), window.MaxLimit)
}

// maxCapacity is the largest bucket a limit refilled per window may hold:
// one that refills within window.MaxRefill.
func maxCapacity(limit, win int64) int64 {
	most := window.MaxLimit
	if perWindow := window.MaxRefill / win; perWindow < most/limit {
		most = perWindow * limit
	}
	return most
}

// unitName spells an RLS unit for an error.
func unitName(u typev3.RateLimitUnit) string { return strings.ToLower(u.String()) + "s" }

// overrideField reports a limit's validation error under the override's
// own fields: requests_per_unit for the limit, unit_multiplier for the
// window (the unit alone always makes a valid one).
func overrideField(field string, err error) error {
	var fe *window.FieldError
	if err == nil || !errors.As(err, &fe) {
		return atField(field, err)
	}
	switch fe.Field {
	case "limit":
		return fmt.Errorf("%w: %srequests_per_unit: %s", validate.ErrInvalid, field, fe.Msg)
	case "window":
		return fmt.Errorf("%w: %sunit_multiplier: %s", validate.ErrInvalid, field, fe.Msg)
	}
	return atField(field, err)
}

// atField is validate.AtField that keeps a nil error nil.
func atField(field string, err error) error {
	if err == nil {
		return nil
	}
	return validate.AtField(field, err)
}

// rlsStatus is the answer for one descriptor.
func rlsStatus(c fsm.Check, r policy.Result) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	if c.Policy == nil {
		return st
	}
	if !r.Allowed {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	st.CurrentLimit = currentLimit(c.Policy, r)
	st.LimitRemaining = uint32(min(max(r.Remaining, 0), math.MaxUint32))
	st.DurationUntilReset = untilReset(r.ResetAfter)
	return st
}

// untilReset is a duration until reset in whole seconds, rounded up
// (window.CeilSeconds, as floodgate's HTTP headers). Envoy's
// X-RateLimit-Reset (enable_x_ratelimit_headers) is the duration's
// seconds alone: 0.9 s left sent as is told a client denied in a window's
// last second to come back in 0 s, and a retry then was denied again.
// envoyproxy/ratelimit answers whole seconds too.
func untilReset(ns int64) *durationpb.Duration {
	return &durationpb.Duration{Seconds: window.CeilSeconds(time.Duration(ns))}
}

// currentLimit describes the limit that decided in RLS terms: a count per
// unit times a multiplier, and the limit's name.
func currentLimit(p *policy.Policy, r policy.Result) *rlsv3.RateLimitResponse_RateLimit {
	rl := &rlsv3.RateLimitResponse_RateLimit{Name: p.DecidedBy(r), RequestsPerUnit: uint32(min(max(r.Limit, 0), math.MaxUint32))}
	var l *window.Limit
	switch {
	case r.Decider >= 0 && r.Decider < len(p.Limits):
		l = &p.Limits[r.Decider].Limit
	case r.Decider == len(p.Limits) && p.Reduced != nil:
		l = &p.Reduced.Limit
	default:
		return rl
	}
	switch l.Calendar {
	case window.CalendarMinute:
		rl.Unit = rlsv3.RateLimitResponse_RateLimit_MINUTE
	case window.CalendarHour:
		rl.Unit = rlsv3.RateLimitResponse_RateLimit_HOUR
	case window.CalendarDay:
		rl.Unit = rlsv3.RateLimitResponse_RateLimit_DAY
	case window.CalendarWeek:
		rl.Unit = rlsv3.RateLimitResponse_RateLimit_WEEK
	case window.CalendarMonth:
		rl.Unit = rlsv3.RateLimitResponse_RateLimit_MONTH
	case window.CalendarYear:
		rl.Unit = rlsv3.RateLimitResponse_RateLimit_YEAR
	default:
		rl.Unit, rl.UnitMultiplier = windowUnit(time.Duration(l.Window))
	}
	return rl
}

// windowUnit expresses a window as the largest RLS unit that divides it
// and a multiplier; a window of no whole seconds has no RLS unit.
func windowUnit(w time.Duration) (rlsv3.RateLimitResponse_RateLimit_Unit, *wrapperspb.UInt32Value) {
	for _, u := range []struct {
		d    time.Duration
		unit rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_DAY},
		{time.Hour, rlsv3.RateLimitResponse_RateLimit_HOUR},
		{time.Minute, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND},
	} {
		if w >= u.d && w%u.d == 0 {
			if n := w / u.d; n > 1 {
				return u.unit, wrapperspb.UInt32(uint32(min(int64(n), math.MaxUint32)))
			}
			return u.unit, nil
		}
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN, nil
}
