package validate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

func TestKeyComposition(t *testing.T) {
	byUserIP := &policy.Policy{Name: "p", KeyBy: []string{"user", "ip"}}
	colocated := &policy.Policy{Name: "shop", Colocate: true}
	for _, tc := range []struct {
		name  string
		key   string
		desc  map[string]string
		p     *policy.Policy
		want  string
		field string // in the error, when one is expected
	}{
		{"plain key", "user:1", nil, nil, "user:1", ""},
		{"sorted descriptors", "", map[string]string{"user": "42", "ip": "10.0.0.1"}, nil, "ip=10.0.0.1,user=42", ""},
		{"key_by order", "", map[string]string{"user": "42", "ip": "10.0.0.1"}, byUserIP, "user=42,ip=10.0.0.1", ""},
		{"escaped values", "", map[string]string{"a": `x,y=z\w`}, nil, `a=x\,y\=z\\w`, ""},
		{"escaping keeps keys apart", "", map[string]string{"a": "1,b=2"}, nil, `a=1\,b\=2`, ""},
		{"empty", "", nil, nil, "", "key:"},
		{"both", "k", map[string]string{"a": "1"}, nil, "", "descriptors:"},
		{"raw key on key_by", "k", nil, byUserIP, "", "key:"},
		{"missing descriptor", "", map[string]string{"user": "1"}, byUserIP, "", `missing "ip"`},
		{"extra descriptor", "", map[string]string{"user": "1", "ip": "2", "x": "3"}, byUserIP, "", "descriptors.x:"},
		{"bad name", "", map[string]string{"a b": "1"}, nil, "", "descriptors:"},
		{"too long", strings.Repeat("k", MaxKeyLen+1), nil, nil, "", "key:"},
		{"colocated: behind the policy's tag", "", map[string]string{"user": "42"}, colocated, "\x00shop\x00user=42", ""},
		{"colocated raw key", "k", nil, colocated, "\x00shop\x00k", ""},
		{"the tag's byte is reserved", "\x00shop\x00k", nil, nil, "", "key: must not start with a NUL byte"},
	} {
		got, err := Key(tc.key, tc.desc, tc.p, "")
		if tc.field == "" {
			if err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
}

// Errors from the window and policy packages come out under the API's
// field paths.
func TestAPIPaths(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"window", "window_ms"},
		{"limit", "limit"},
		{"cost", "cost"},
		{"limits[1].window", "limits[1].limit.window_ms"},
		{"limits[0].calendar", "limits[0].limit.calendar"},
		{"limits[0].name", "limits[0].name"},
		{"reduced.burst", "reduced.limit.burst"},
		{"elastic.capacity", "elastic.capacity"},
		{"soft_percent", "soft_percent"},
	} {
		err := AtField("policies[2].", &window.FieldError{Field: tc.in, Msg: "m"})
		if want := "policies[2]." + tc.want + ": m"; !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s: %q, want suffix %q", tc.in, err, want)
		}
	}
}

// An error that names no field of its own is reported under the prefix,
// which is then the field: "checks[0].policy: corrupt", not
// "checks[0].policy.corrupt".
func TestAtFieldWithoutAFieldError(t *testing.T) {
	for _, tc := range []struct{ prefix, want string }{
		{"checks[0].policy.", "invalid request: checks[0].policy: corrupt policy encoding"},
		{"", "invalid request: corrupt policy encoding"},
	} {
		if err := AtField(tc.prefix, errors.New("corrupt policy encoding")); err.Error() != tc.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %q, want %q", tc.prefix, err, tc.want)
		}
	}
}

// Without a resolver (the SDK), a request naming a policy is checked as
// far as it can be.
func TestRequestWithoutResolver(t *testing.T) {
	neg := int64(-1)
	if _, err := Request(&pb.AllowRequest{Key: "k", Policy: "p", Cost: &neg}, "", 0, nil, nil); err == nil {
		t.Fatal("negative cost passed")
	}
	c, err := Request(&pb.AllowRequest{Descriptors: map[string]string{"user": "1"}, Policy: "p"}, "", 0, nil, nil)
	if err != nil || c.Policy != nil || c.Key != "user=1" {
		t.Fatalf("%+v %v", c, err)
	}
}

// Descriptors are bounded by themselves, and a fault is reported under
// descriptors, never as the key they would have made.
func TestDescriptorBounds(t *testing.T) {
	huge := strings.Repeat("n", 1<<20)
	many := map[string]string{}
	for i := 0; i <= MaxDescriptors; i++ {
		many[strings.Repeat("d", i+1)] = "1"
	}
	for _, tc := range []struct {
		name  string
		desc  map[string]string
		field string
	}{
		{"1 MiB name", map[string]string{huge: "1"}, "descriptors: a name of 1048576 bytes is longer than 1024"},
		{"1 MiB value", map[string]string{"user": huge}, "descriptors.user: 1048576 bytes"},
		{"too many", many, "descriptors: 33 given, at most 32"},
		{"empty name", map[string]string{"": "1"}, "descriptors: name"},
		{"key too long", map[string]string{"a": strings.Repeat("v", 600), "b": strings.Repeat("v", 600)}, "descriptors: the key they make"},
		{"value not UTF-8", map[string]string{"user": "4\xff2"}, "descriptors.user: must be valid UTF-8"},
	} {
		_, err := Key("", tc.desc, nil, "requests[1].")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "requests[1]."+tc.field) {
			t.Errorf("%s: %v, want an error naming requests[1].%s", tc.name, err, tc.field)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: a %d-byte message", tc.name, len(err.Error()))
		}
	}
}

// A key that is not UTF-8 is refused by name: gRPC refuses it on decoding,
// but the HTTP API and the SDK's local checks reach Key with it, and no
// answer could carry it back.
func TestKeyNotUTF8(t *testing.T) {
	for _, key := range []string{"\xfe1", "ok\xff", "\xc3"} {
		_, err := Key(key, nil, nil, "requests[2].")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "requests[2].key: must be valid UTF-8") {
			t.Errorf("%q: %v", key, err)
		}
	}
	if k, err := Key("clé-🔑", nil, nil, ""); err != nil || k != "clé-🔑" {
		t.Errorf("a UTF-8 key: %q %v", k, err)
	}
}

// Envoy's entries are named as RLS names them.
func TestEntriesKeyNamesEntries(t *testing.T) {
	_, err := EntriesKey(map[string]string{"a b": "1"}, nil, "descriptors[3].")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "descriptors[3].entries: name") {
		t.Errorf("got %v", err)
	}
	if k, err := EntriesKey(map[string]string{"ip": "1", "path": "/a"}, nil, ""); err != nil || k != "ip=1,path=/a" {
		t.Errorf("got %q %v", k, err)
	}
}

// One SetPolicies call takes MaxPolicies; PolicyList (a backup's) takes
// any number, and checks each and their names alike.
func TestPolicyListHasNoBound(t *testing.T) {
	many := make([]*pb.Policy, MaxPolicies+6)
	for i := range many {
		many[i] = &pb.Policy{Name: fmt.Sprintf("p%d", i),
			Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 5, WindowMs: 60_000}}}}
	}
	if _, err := Policies(many, window.DefaultMaxLogLength); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Policies took %d: %v", len(many), err)
	}
	ps, err := PolicyList(many, window.DefaultMaxLogLength)
	if err != nil || len(ps) != len(many) {
		t.Fatalf("PolicyList: %d, %v", len(ps), err)
	}
	many[MaxPolicies+5] = &pb.Policy{Name: many[3].Name, Limits: many[3].Limits}
	if _, err := PolicyList(many, window.DefaultMaxLogLength); err == nil || !strings.Contains(err.Error(), "policies[1005].name") {
		t.Fatalf("a name twice: %v", err)
	}
}

// A sliding counter asked for without buckets is checked in the default
// for its window, spelled out so that the log entry (and a node of an
// older release, which reads 0 as 60) says exactly what was counted; a
// second, which 60 buckets do not divide, is no longer refused.
func TestSlidingCounterBucketsAreSpelledOut(t *testing.T) {
	for _, c := range []struct {
		ms, buckets int64
		want        int32
	}{{60_000, 0, 60}, {1000, 0, 50}, {7000, 0, 56}, {1000, 10, 10}} {
		for _, alg := range []pb.Algorithm{pb.Algorithm_SLIDING_COUNTER, pb.Algorithm_SLIDING_COUNTER_WEIGHTED} {
			l, err := Limit(&pb.Limit{Algorithm: alg, Limit: 5, WindowMs: c.ms, Buckets: int32(c.buckets)}, "limit.", 0)
			if err != nil || l.Buckets != c.want {
				t.Errorf("%v over %d ms, buckets %d: %d buckets, %v; want %d", alg, c.ms, c.buckets, l.Buckets, err, c.want)
			}
		}
	}
	if _, err := Limit(&pb.Limit{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 5, WindowMs: 1000, Buckets: 60}, "limit.", 0); err == nil ||
		!strings.Contains(err.Error(), "limit.buckets") {
		t.Errorf("60 buckets asked for over a second: %v, want an error naming limit.buckets", err)
	}
}

// A reduced limit may not share its name with a limit (nor may a limit be
// named "reduced" beside an unnamed one): decided_by would not say which
// decided. A backup's policies (PolicyList) are not held to it: a policy
// stored before the rule stays restorable.
func TestReducedNameIsDistinct(t *testing.T) {
	lim := func(name string, ms int64) *pb.PolicyLimit {
		return &pb.PolicyLimit{Name: name, Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 5, WindowMs: ms}}
	}
	for _, c := range []struct {
		limit, reduced, want string
	}{
		{"per-minute", "per-minute", `policies[1].reduced.name: "per-minute" is also the name of limits[0]`},
		{"reduced", "", `policies[1].limits[0].name: "reduced" is what answers call`},
		{"per-minute", "slow-lane", ""},
		{"", "", ""},
		{"", "reduced", ""},
	} {
		pps := []*pb.Policy{
			{Name: "ok", Limits: []*pb.PolicyLimit{lim("", 60_000)}},
			{Name: "p", Limits: []*pb.PolicyLimit{lim(c.limit, 60_000)}, Reduced: lim(c.reduced, 1000)},
		}
		_, err := Policies(pps, 0)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("limit %q, reduced %q: %v, want %q", c.limit, c.reduced, err, c.want)
		}
		if _, err := PolicyList(pps, 0); err != nil {
			t.Errorf("limit %q, reduced %q: a backup's policies refused: %v", c.limit, c.reduced, err)
		}
	}
}
