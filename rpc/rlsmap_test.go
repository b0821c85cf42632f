package rpc

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// override is a descriptor user=42 with a limit override of n per mult
// units (no multiplier when 0).
func override(n uint32, u typev3.RateLimitUnit, mult uint32) *rlcommon.RateLimitDescriptor {
	d := desc("user", "42")
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: u}
	if mult > 0 {
		d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return d
}

func rlsPolicies() func(string) *policy.Policy {
	perMin := window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: int64(time.Minute)}
	ps := map[string]*policy.Policy{
		"edge":                {Name: "edge", Limits: []policy.Limit{{Name: "per-minute", Limit: perMin}}},
		"edge.remote_address": {Name: "edge.remote_address", Limits: []policy.Limit{{Limit: perMin}}},
		"api":                 {Name: "api", KeyBy: []string{"user"}, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.TokenBucket, Limit: 5, Window: int64(time.Second), Burst: 9}}}},
		// Soft at 1000% over: a sliding log's override is stretched to 1100%.
		"soft": {Name: "soft", Mode: policy.Soft, SoftPercent: 1000, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: int64(time.Hour)}}}},
	}
	return func(name string) *policy.Policy { return ps[name] }
}

func TestRLSChecksMapDescriptorsToPolicies(t *testing.T) {
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
		desc("remote_address", "10.0.0.1"),    // edge.remote_address
		desc("path", "/a,b", "method", "GET"), // falls back to edge
		desc("user", "42"),                    // edge too
	}}
	cs, _, err := rlsChecks(req, rlsPolicies(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ policy, key string }{
		{"edge.remote_address", "remote_address=10.0.0.1"},
		{"edge", `method=GET,path=/a\,b`},
		{"edge", "user=42"},
	}
	for i, w := range want {
		if cs[i].Policy == nil || cs[i].Policy.Name != w.policy || cs[i].Key != w.key || cs[i].Cost != 1 {
			t.Errorf("descriptor %d: policy %v key %q cost %d, want %s %q 1", i, cs[i].Policy, cs[i].Key, cs[i].Cost, w.policy, w.key)
		}
	}
	// A domain with no policy: nothing limits it.
	cs, _, err = rlsChecks(&rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommon.RateLimitDescriptor{desc("a", "b")}}, rlsPolicies(), 0)
	if err != nil || cs[0].Policy != nil {
		t.Fatalf("unknown domain: %+v %v, want not limited", cs, err)
	}
}

// A policy with key_by matches only descriptors of exactly its key_by
// names: one of other keys falls to the next name, then is not limited,
// as envoyproxy/ratelimit answers a descriptor no rule matches, and the
// request's other descriptors are still counted. Refused, it failed the
// whole request, which Envoy lets through under failure_mode_deny: false.
func TestRLSKeyByMatchesOnlyItsKeys(t *testing.T) {
	perSec := []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 5, Window: int64(time.Second)}}}
	ps := map[string]*policy.Policy{
		"api":      {Name: "api", KeyBy: []string{"user"}, Limits: perSec},
		"api.user": {Name: "api.user", KeyBy: []string{"tenant"}, Limits: perSec}, // cannot key its own name's descriptors
		"api.a.b":  {Name: "api.a.b", KeyBy: []string{"b", "a"}, Limits: perSec},
	}
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*rlcommon.RateLimitDescriptor{
		desc("user", "42"),                 // api.user cannot key it: api
		desc("generic_key", "vhost"),       // api lacks user: not limited
		desc("user", "42", "path", "/x"),   // api takes user only: not limited
		desc("a", "1", "b", "2"),           // api.a.b, in its key_by order
		desc("x-user/id", "7", "user", ""), // the odd key is no key_by name: not limited
	}}
	cs, _, err := rlsChecks(req, func(n string) *policy.Policy { return ps[n] }, 0)
	if err != nil {
		t.Fatalf("a descriptor the policies' key_by cannot key failed the request: %v", err)
	}
	want := []struct{ policy, key string }{{"api", "user=42"}, {}, {}, {"api.a.b", "b=2,a=1"}, {}}
	for i, w := range want {
		switch {
		case w.policy == "" && cs[i].Policy != nil:
			t.Errorf("descriptor %d: under %s, want not limited", i, cs[i].Policy.Name)
		case w.policy != "" && (cs[i].Policy == nil || cs[i].Policy.Name != w.policy || cs[i].Key != w.key):
			t.Errorf("descriptor %d: %+v, want %s %q", i, cs[i], w.policy, w.key)
		}
	}
}

func TestRLSCost(t *testing.T) {
	for _, c := range []struct {
		request uint32
		own     *wrapperspb.UInt64Value
		want    int64
	}{
		{0, nil, 1}, // Envoy leaves hits_addend 0 for one hit
		{3, nil, 3},
		{3, wrapperspb.UInt64(0), 0}, // a descriptor's own 0 peeks
		{0, wrapperspb.UInt64(7), 7},
	} {
		d := desc("user", "1")
		d.HitsAddend = c.own
		cs, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: c.request, Descriptors: []*rlcommon.RateLimitDescriptor{d}}, rlsPolicies(), 0)
		if err != nil || cs[0].Cost != c.want {
			t.Errorf("hits %d/%v: cost %v %v, want %d", c.request, c.own, cs, err, c.want)
		}
	}
}

// A cost above what a descriptor's limits admit at once is not an error,
// which Envoy under failure_mode_deny: false would let through: the check
// peeks, to be answered over the limit.
func TestRLSCostAboveTheLimitIsOverTheLimit(t *testing.T) {
	for _, own := range []uint64{11, 1 << 40} { // edge admits 10 at once
		d := desc("user", "1")
		d.HitsAddend = wrapperspb.UInt64(own)
		cs, tooBig, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{d, desc("user", "2")}}, rlsPolicies(), 0)
		if err != nil || !tooBig[0] || tooBig[1] || cs[0].Cost != 0 || cs[0].Policy == nil || cs[0].Key != "user=1" || cs[1].Cost != 1 {
			t.Errorf("hits_addend %d: %+v %v %v, want a peek marked too big", own, cs, tooBig, err)
		}
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 10, Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "1")}}
	if cs, tooBig, err := rlsChecks(req, rlsPolicies(), 0); err != nil || tooBig[0] || cs[0].Cost != 10 {
		t.Errorf("hits_addend 10 of 10: %+v %v %v, want counted", cs, tooBig, err)
	}
}

// In a colocated set, one descriptor too big makes every one of the set
// peek and be over the limit, so the set counts nothing.
func TestPeekTooBigSets(t *testing.T) {
	shop := &policy.Policy{Name: "shop", Colocate: true}
	other := &policy.Policy{Name: "other"}
	cs := []fsm.Check{{Key: "a", Policy: shop, Cost: 1}, {Key: "x", Policy: other, Cost: 1}, {Key: "b", Policy: shop}, {Key: "c", Policy: shop, Cost: 1}}
	tooBig := []bool{false, false, true, false}
	peekTooBigSets(cs, tooBig)
	for i, want := range []bool{true, false, true, true} {
		if tooBig[i] != want || (want && cs[i].Cost != 0) || (!want && cs[i].Cost != 1) {
			t.Errorf("check %d: too big %v cost %d, want %v", i, tooBig[i], cs[i].Cost, want)
		}
	}
	if r := overLimit(shop, policy.Result{Allowed: true, Remaining: 2}, 0); r.Allowed || r.Remaining != 2 {
		t.Errorf("over the limit: %+v", r)
	}
	if r := overLimit(&policy.Policy{Mode: policy.Shadow}, policy.Result{Allowed: true}, 0); !r.Allowed || !r.WouldDeny {
		t.Errorf("shadow, over the limit: %+v, want admitted and would-deny", r)
	}
}

// A denial of a peek (a cost that never fits, a full key store) says when
// to come back: the policy's longest window, not 0, which Envoy sent as
// X-RateLimit-Reset: 0 and a client took for "retry now", for ever. A
// peek that found a state keeps its own reset.
func TestOverLimitSaysWhenToComeBack(t *testing.T) {
	p := &policy.Policy{Name: "api", Limits: []policy.Limit{
		{Limit: window.Limit{Algorithm: window.GCRA, Limit: 10, Window: int64(time.Minute)}},
		{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 100, Window: int64(time.Hour)}},
	}}
	if r := overLimit(p, policy.Result{Allowed: true, Remaining: 1}, 0); r.Allowed || r.ResetAfter != int64(time.Hour) {
		t.Errorf("a peek of no state: %+v, want denied, reset after an hour", r)
	}
	if r := overLimit(p, policy.Result{Allowed: true, ResetAfter: int64(5 * time.Second)}, 0); r.ResetAfter != int64(5*time.Second) {
		t.Errorf("a peek of a state: reset after %s, want its own 5s", time.Duration(r.ResetAfter))
	}
	// A monthly quota (a calendar limit has no Window): the month's end.
	monthly := &policy.Policy{Name: "monthly", Limits: []policy.Limit{
		{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 20000, Calendar: window.CalendarMonth}},
	}}
	now := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	if r := overLimit(monthly, policy.Result{Allowed: true, Remaining: 20000}, now.UnixNano()); r.Allowed || r.ResetAfter != int64(30*time.Hour) {
		t.Errorf("a peek of no state under a monthly quota: %+v, want denied, reset after 30h (December 1st)", r)
	}
}

// A value that makes the key too long to count (a long header or path) is
// counted under its digest: an error would let the request through.
func TestRLSLongValueCountsUnderItsDigest(t *testing.T) {
	long := strings.Repeat("x", 2000)
	key := func(d *rlcommon.RateLimitDescriptor) string {
		t.Helper()
		cs, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{d}}, rlsPolicies(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return cs[0].Key
	}
	k := key(desc("remote_address", long))
	if len(k) > validate.MaxKeyLen || !strings.HasPrefix(k, "remote_address=sha256:") || k != key(desc("remote_address", long)) {
		t.Errorf("a 2000-byte value: key %q", k)
	}
	if k == key(desc("remote_address", long+"y")) {
		t.Error("two long values share a key")
	}
	// Two values that fit alone but not together: each longer than a
	// digest is digested; a short one beside a long one is kept; a key
	// that fits is left alone.
	if k := key(desc("path", strings.Repeat("p", 600), "method", strings.Repeat("m", 600))); !strings.Contains(k, "method=sha256:") || !strings.Contains(k, "path=sha256:") {
		t.Errorf("two values too long together: key %q", k)
	}
	if k := key(desc("path", "/a", "method", long)); !strings.HasPrefix(k, "method=sha256:") || !strings.HasSuffix(k, ",path=/a") {
		t.Errorf("a long value and a short one: key %q", k)
	}
	if k := key(desc("path", strings.Repeat("p", 900))); k != "path="+strings.Repeat("p", 900) {
		t.Errorf("a value that fits was changed: %q", k)
	}
}

func TestRLSOverride(t *testing.T) {
	// No policy: a fixed window under the domain's name.
	cs, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: "nolimits", Descriptors: []*rlcommon.RateLimitDescriptor{override(100, typev3.RateLimitUnit_MINUTE, 5)}}, rlsPolicies(), 0)
	if err != nil {
		t.Fatal(err)
	}
	l := cs[0].Policy.Limits[0].Limit
	if cs[0].Policy.Name != "nolimits" || l.Algorithm != window.FixedWindow || l.Limit != 100 || l.Window != int64(5*time.Minute) {
		t.Errorf("override without policy: %+v %+v", cs[0].Policy, l)
	}
	// A policy: its algorithm and key_by, the override's numbers; the
	// shared policy itself untouched.
	pols := rlsPolicies()
	cs, _, err = rlsChecks(&rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*rlcommon.RateLimitDescriptor{override(50, typev3.RateLimitUnit_SECOND, 0)}}, pols, 0)
	if err != nil {
		t.Fatal(err)
	}
	l = cs[0].Policy.Limits[0].Limit
	if l.Algorithm != window.TokenBucket || l.Limit != 50 || l.Window != int64(time.Second) || l.Burst != 90 || cs[0].Key != "user=42" {
		t.Errorf("override of api: %+v key %q", l, cs[0].Key)
	}
	if pols("api").Limits[0].Limit.Limit != 5 {
		t.Error("an override changed the stored policy")
	}
	// Calendar units.
	cs, _, err = rlsChecks(&rlsv3.RateLimitRequest{Domain: "x", Descriptors: []*rlcommon.RateLimitDescriptor{override(9, typev3.RateLimitUnit_MONTH, 0)}}, pols, 0)
	if err != nil || cs[0].Policy.Limits[0].Limit.Calendar != window.CalendarMonth {
		t.Errorf("monthly override: %+v %v", cs, err)
	}
}

// An override keeps the policy's burst in proportion to its limit: a
// burst kept as it was let an override that lowers the rate admit the
// policy's whole burst at once, and capped one that raises it.
func TestRLSOverrideScalesTheBurst(t *testing.T) {
	for _, tc := range []struct {
		name         string
		alg          window.Algorithm
		limit, burst int64
		perUnit      uint32
		unit         typev3.RateLimitUnit
		mult         uint32
		want         int64
	}{
		{"lowered", window.TokenBucket, 100, 200, 10, typev3.RateLimitUnit_MINUTE, 0, 20},
		{"raised", window.TokenBucket, 5, 9, 50, typev3.RateLimitUnit_SECOND, 0, 90},
		{"rounded up", window.TokenBucket, 3, 4, 2, typev3.RateLimitUnit_SECOND, 0, 3},
		{"never below one", window.GCRA, 1000, 2, 1, typev3.RateLimitUnit_SECOND, 0, 1},
		{"default stays default", window.TokenBucket, 10, 0, 3, typev3.RateLimitUnit_SECOND, 0, 0},
		{"at most the largest limit", window.TokenBucket, 1, 1_000_000, 1_000_000, typev3.RateLimitUnit_SECOND, 0, window.MaxLimit},
		// A million seconds' worth scaled to one a day would take 2,700
		// years to refill: the most that refills within window.MaxRefill.
		{"refills in time", window.TokenBucket, 1000, 1_000_000_000, 1, typev3.RateLimitUnit_DAY, 0, window.MaxRefill / int64(24*time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &policy.Policy{Name: "b", KeyBy: []string{"user"}, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: tc.alg, Limit: tc.limit, Window: int64(time.Second), Burst: tc.burst}}}}
			pols := func(name string) *policy.Policy {
				if name == "b" {
					return p
				}
				return nil
			}
			cs, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: "b", Descriptors: []*rlcommon.RateLimitDescriptor{override(tc.perUnit, tc.unit, tc.mult)}}, pols, 0)
			if err != nil {
				t.Fatal(err)
			}
			l := cs[0].Policy.Limits[0].Limit
			if l.Burst != tc.want {
				t.Errorf("burst %d, want %d (limit %d per %s)", l.Burst, tc.want, l.Limit, time.Duration(l.Window))
			}
			if err := l.Validate(0); err != nil {
				t.Errorf("the override's limit is invalid: %v", err)
			}
			if p.Limits[0].Limit.Burst != tc.burst {
				t.Error("an override changed the stored policy")
			}
		})
	}
}

// An override of a sliding counter policy is checked in buckets that
// divide its window, whatever unit Envoy sends: a second does not divide
// into the default 60 buckets, and refusing it would let the request
// through under failure_mode_deny: false. Buckets that divide are kept.
func TestRLSOverrideOfASlidingCounterFindsBucketsThatDivide(t *testing.T) {
	perMin := window.Limit{Algorithm: window.SlidingCounter, Limit: 100, Window: int64(time.Minute)}
	weighted := window.Limit{Algorithm: window.SlidingCounterWeighted, Limit: 100, Window: int64(time.Hour), Buckets: 12}
	ps := map[string]*policy.Policy{
		"sc":  {Name: "sc", Limits: []policy.Limit{{Name: "per-minute", Limit: perMin}}},
		"scw": {Name: "scw", Limits: []policy.Limit{{Name: "per-hour", Limit: weighted}}},
	}
	pols := func(name string) *policy.Policy { return ps[name] }
	for _, c := range []struct {
		domain  string
		unit    typev3.RateLimitUnit
		mult    uint32
		buckets int32
	}{
		{"sc", typev3.RateLimitUnit_SECOND, 0, 50},
		{"sc", typev3.RateLimitUnit_SECOND, 7, 56},
		{"sc", typev3.RateLimitUnit_SECOND, 3, 0}, // the default divides 3s
		{"sc", typev3.RateLimitUnit_MINUTE, 0, 0},
		{"scw", typev3.RateLimitUnit_HOUR, 0, 12},
		{"scw", typev3.RateLimitUnit_SECOND, 0, 50},
	} {
		cs, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: c.domain, Descriptors: []*rlcommon.RateLimitDescriptor{override(5, c.unit, c.mult)}}, pols, 0)
		if err != nil {
			t.Errorf("%s, %d × %v: %v", c.domain, c.mult, c.unit, err)
			continue
		}
		if l := cs[0].Policy.Limits[0].Limit; l.Buckets != c.buckets || l.Algorithm != ps[c.domain].Limits[0].Limit.Algorithm {
			t.Errorf("%s, %d × %v: %v with %d buckets, want %d", c.domain, c.mult, c.unit, l.Algorithm, l.Buckets, c.buckets)
		}
	}
}

// An override a sliding log cannot hold (past --max-log-length, or past
// it once soft mode stretches it) is counted by a sliding counter of the
// same limit and window, not refused: a refusal failed the whole request,
// which Envoy lets through under failure_mode_deny: false.
func TestRLSOverrideOfALogPastTheCapIsASlidingCounter(t *testing.T) {
	for _, c := range []struct {
		domain string
		n      uint32
		unit   typev3.RateLimitUnit
		maxLog int64
		want   window.Algorithm
	}{
		{"edge", 5000, typev3.RateLimitUnit_HOUR, 0, window.SlidingLog},
		{"edge", 10000, typev3.RateLimitUnit_HOUR, 0, window.SlidingLog},
		{"edge", 10001, typev3.RateLimitUnit_HOUR, 0, window.SlidingCounter},
		{"edge", 50, typev3.RateLimitUnit_MINUTE, 40, window.SlidingCounter},
		{"soft", 900, typev3.RateLimitUnit_HOUR, 0, window.SlidingLog},       // stretched to 9,900
		{"soft", 10000, typev3.RateLimitUnit_HOUR, 0, window.SlidingCounter}, // stretched to 110,000
	} {
		d := override(c.n, c.unit, 0)
		cs, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: c.domain, Descriptors: []*rlcommon.RateLimitDescriptor{d}}, rlsPolicies(), c.maxLog)
		if err != nil {
			t.Errorf("%s, %d per %v (max log %d): %v", c.domain, c.n, c.unit, c.maxLog, err)
			continue
		}
		l := cs[0].Policy.Limits[0].Limit
		if l.Algorithm != c.want || l.Limit != int64(c.n) || (c.want == window.SlidingCounter && l.Buckets != window.DefaultBucketsFor(l.Window)) {
			t.Errorf("%s, %d per %v (max log %d): %v of %d with %d buckets, want %v of %d", c.domain, c.n, c.unit, c.maxLog, l.Algorithm, l.Limit, l.Buckets, c.want, c.n)
		}
	}
}

func TestRLSRefusesBadInputNamingTheField(t *testing.T) {
	neg := desc("a", "b")
	neg.IsNegativeHits = true
	zero := desc("a", "b")
	zero.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 0, Unit: typev3.RateLimitUnit_SECOND}
	unknownUnit := desc("a", "b")
	unknownUnit.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	noKey := desc("a", "b", "", "c")
	var kv []string
	for i := 0; i <= validate.MaxDescriptors; i++ {
		kv = append(kv, fmt.Sprintf("k%d", i), "v")
	}
	manyEntries := desc(kv...)
	for _, c := range []struct {
		domain string
		d      *rlcommon.RateLimitDescriptor
		field  string
	}{
		{"", desc("a", "b"), "domain"},
		{"edge", &rlcommon.RateLimitDescriptor{}, "descriptors[0].entries"},
		{"edge", desc("a", "1", "a", "2"), "descriptors[0].entries[1].key"},
		{"edge", neg, "descriptors[0].is_negative_hits"},
		{"edge", zero, "descriptors[0].limit.requests_per_unit"},
		{"edge", unknownUnit, "descriptors[0].limit.unit"},
		{"edge", noKey, "descriptors[0].entries[1].key: must not be empty"},
		{"other", noKey, "descriptors[0].entries[1].key: must not be empty"}, // with no policy too
		{"edge", manyEntries, "descriptors[0].entries: 33 given"},
		{"we ird!", override(2, typev3.RateLimitUnit_MINUTE, 0), "domain: \"we ird!\" must be"},
		{"edge", override(math.MaxUint32, typev3.RateLimitUnit_MINUTE, 0), "descriptors[0].limit.requests_per_unit: must be"},
		{"edge", override(3, typev3.RateLimitUnit_MINUTE, 307445735), "descriptors[0].limit.unit_multiplier: 307445735 minutes is longer than the longest window"},
		{"edge", override(3, typev3.RateLimitUnit_DAY, 367), "descriptors[0].limit.unit_multiplier: 367 days"},
		{"edge", override(3, typev3.RateLimitUnit_SECOND, math.MaxUint32), "descriptors[0].limit.unit_multiplier"},
	} {
		_, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: c.domain, Descriptors: []*rlcommon.RateLimitDescriptor{c.d}}, rlsPolicies(), 0)
		if !errors.Is(err, validate.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s %v: error %v, want ErrInvalid naming %s", c.domain, c.d, err, c.field)
		}
	}
	if _, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: "edge"}, rlsPolicies(), 0); !errors.Is(err, validate.ErrInvalid) ||
		!strings.Contains(err.Error(), "descriptors: must not be empty") {
		t.Errorf("no descriptors: %v", err)
	}
}

// What Envoy's configuration may send and floodgate's names cannot hold is
// counted, not refused (a refusal lets the request through under
// failure_mode_deny: false): an entry key of other characters, or too
// long, under its digest; a key too long even after long values are
// digested, under the digest of the whole key. The same entries always
// make the same key, and different ones different keys.
func TestRLSOddNamesAndLongKeysAreCounted(t *testing.T) {
	key := func(d *rlcommon.RateLimitDescriptor) string {
		t.Helper()
		cs, _, err := rlsChecks(&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{d}}, rlsPolicies(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if cs[0].Policy == nil || cs[0].Policy.Name != "edge" {
			t.Fatalf("%v: policy %v, want edge", d, cs[0].Policy)
		}
		return cs[0].Key
	}
	for _, name := range []string{"x-user/id", "ключ", "httproute/default/backend/rule/0/match/0", "a b", strings.Repeat("k", 2000)} {
		k := key(desc(name, "42", "path", "/a"))
		if want := "path=/a," + digest(name) + "=42"; k != want {
			t.Errorf("entry key %.20q: key %q, want %q", name, k, want)
		}
	}
	if key(desc("x-user/id", "1")) == key(desc("x-user/ie", "1")) {
		t.Error("two odd names share a key")
	}
	var kv []string
	for i := range 16 {
		kv = append(kv, fmt.Sprintf("h%02d", i), strings.Repeat("v", 70))
	}
	k := key(desc(kv...))
	if len(k) != digestLen || !strings.HasPrefix(k, "sha256:") || k != key(desc(kv...)) {
		t.Errorf("16 values of 70 bytes: key %q", k)
	}
	kv[len(kv)-1] += "w"
	if key(desc(kv...)) == k {
		t.Error("two long keys share a digest")
	}
}

func TestRLSStatus(t *testing.T) {
	p := rlsPolicies()("edge")
	st := rlsStatus(fsmCheck(p), policy.Result{Allowed: false, Decider: 0, Limit: 10, Remaining: 0, ResetAfter: int64(1500 * time.Millisecond)})
	if st.Code != rlsv3.RateLimitResponse_OVER_LIMIT || st.CurrentLimit.GetRequestsPerUnit() != 10 ||
		st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || st.CurrentLimit.GetName() != "per-minute" ||
		st.DurationUntilReset.AsDuration() != 2*time.Second {
		t.Errorf("status %v", st)
	}
	if st := rlsStatus(fsmCheck(nil), policy.Result{}); st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit != nil {
		t.Errorf("unlimited descriptor: %v", st)
	}
	for _, c := range []struct {
		w    time.Duration
		unit rlsv3.RateLimitResponse_RateLimit_Unit
		mult uint32
	}{
		{time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND, 0},
		{30 * time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND, 30},
		{90 * time.Minute, rlsv3.RateLimitResponse_RateLimit_MINUTE, 90},
		{48 * time.Hour, rlsv3.RateLimitResponse_RateLimit_DAY, 2},
		{1500 * time.Millisecond, rlsv3.RateLimitResponse_RateLimit_UNKNOWN, 0},
	} {
		u, m := windowUnit(c.w)
		if u != c.unit || m.GetValue() != c.mult {
			t.Errorf("window %s: %v ×%d, want %v ×%d", c.w, u, m.GetValue(), c.unit, c.mult)
		}
	}
}

// Envoy's X-RateLimit-Reset is duration_until_reset's seconds alone, so
// the duration is whole seconds, rounded up: a denial with 0.9 s left must
// not tell the client to come back in 0 s.
func TestRLSDurationUntilResetIsWholeSecondsRoundedUp(t *testing.T) {
	p := rlsPolicies()("edge")
	for _, c := range []struct {
		left time.Duration
		want int64
	}{
		{0, 0}, {time.Nanosecond, 1}, {900 * time.Millisecond, 1}, {time.Second, 1},
		{1500 * time.Millisecond, 2}, {time.Minute, 60}, {-time.Second, 0},
	} {
		st := rlsStatus(fsmCheck(p), policy.Result{Limit: 10, ResetAfter: int64(c.left)})
		if d := st.GetDurationUntilReset(); d.GetSeconds() != c.want || d.GetNanos() != 0 {
			t.Errorf("%s left: duration_until_reset %ds %dns, want %ds (Envoy's X-RateLimit-Reset reads the seconds)", c.left, d.GetSeconds(), d.GetNanos(), c.want)
		}
	}
}

func fsmCheck(p *policy.Policy) fsm.Check { return fsm.Check{Key: "k", Policy: p, Cost: 1} }
