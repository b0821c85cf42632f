package policyfile

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// full uses every field of the format.
const full = `
policies:
  - name: api
    mode: elastic
    elastic: {ceiling_percent: 200, capacity: 1000}
    consistency: fast
    count_denied: true
    key_by: [user, ip]
    limits:
      - name: per-minute
        algorithm: sliding_log
        limit: 10
        window: 1m
      - {name: per-hour, algorithm: sliding_counter, limit: 500, window: 1h, buckets: 60}
      - {algorithm: fixed_window, limit: 20000, calendar: month}
      - {algorithm: token_bucket, limit: 5, window: 1s, burst: 20}
      - {algorithm: GCRA, limit: 100, window: 1500ms, burst: 3}
      - {algorithm: sliding_counter_weighted, limit: 7, window: 24h}
    reduced: {name: slow-lane, algorithm: sliding_log, limit: 10, window: 1m}
  - name: soft
    mode: soft
    soft_percent: 10
    limits: [{algorithm: sliding_log, limit: 1, window: 1s}]
`

func limit(name string, l *pb.Limit) *pb.PolicyLimit { return &pb.PolicyLimit{Name: name, Limit: l} }

func TestParsePolicies(t *testing.T) {
	fullWant := []*pb.Policy{{
		Name:        "api",
		Mode:        pb.Mode_MODE_ELASTIC,
		Elastic:     &pb.Elastic{CeilingPercent: 200, Capacity: 1000},
		Consistency: pb.Consistency_CONSISTENCY_FAST,
		CountDenied: true,
		KeyBy:       []string{"user", "ip"},
		Limits: []*pb.PolicyLimit{
			limit("per-minute", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}),
			limit("per-hour", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 500, WindowMs: 3_600_000, Buckets: 60}),
			limit("", &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 20000, Calendar: pb.CalendarUnit_CALENDAR_UNIT_MONTH}),
			limit("", &pb.Limit{Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 5, WindowMs: 1000, Burst: 20}),
			limit("", &pb.Limit{Algorithm: pb.Algorithm_GCRA, Limit: 100, WindowMs: 1500, Burst: 3}),
			limit("", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_COUNTER_WEIGHTED, Limit: 7, WindowMs: 86_400_000}),
		},
		Reduced: limit("slow-lane", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}),
	}, {
		Name:        "soft",
		Mode:        pb.Mode_MODE_SOFT,
		SoftPercent: 10,
		Limits:      []*pb.PolicyLimit{limit("", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1, WindowMs: 1000})},
	}}
	for _, tc := range []struct {
		name, in string
		want     []*pb.Policy
	}{
		{"every field", full, fullWant},
		{"defaults", "policies:\n- name: p\n  limits:\n  - algorithm: sliding_log\n    limit: 3\n    window: 10s\n", []*pb.Policy{{
			Name: "p", Mode: pb.Mode_MODE_HARD, Consistency: pb.Consistency_CONSISTENCY_STRICT,
			Limits: []*pb.PolicyLimit{limit("", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 3, WindowMs: 10_000})},
		}}},
		{"explicit hard and strict, null fields", "policies:\n- name: p\n  mode: hard\n  consistency: strict\n  reduced:\n  key_by: ~\n" +
			"  limits: [{algorithm: fixed_window, limit: 3, window: 1m}]\n", []*pb.Policy{{
			Name:   "p",
			Limits: []*pb.PolicyLimit{limit("", &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 3, WindowMs: 60_000})},
		}}},
		// Server-side rules (a limit of 0, elastic settings outside elastic
		// mode) are left to the server.
		{"no semantic checks", "policies: [{name: x, mode: hard, elastic: {capacity: 5}, limits: [{algorithm: gcra, limit: 0}]}]", []*pb.Policy{{
			Name: "x", Elastic: &pb.Elastic{Capacity: 5},
			Limits: []*pb.PolicyLimit{limit("", &pb.Limit{Algorithm: pb.Algorithm_GCRA})},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d policies, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !proto.Equal(got[i], tc.want[i]) {
					t.Errorf("policy %d:\n got %v\nwant %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// A whole number in exponent form is whole: 1e3 is 1000.
func TestParseWholeExponent(t *testing.T) {
	ps, err := Parse(strings.NewReader("policies:\n- name: p\n  limits:\n  - {algorithm: sliding_log, limit: 1e3, window: 1m}\n"))
	if err != nil || ps[0].Limits[0].Limit.Limit != 1000 {
		t.Fatalf("%v %v", ps, err)
	}
}

// Numbers spelled otherwise than in decimal mean what they say: 0o17 is
// octal, 0x10 hex, 0 zero.
func TestParseNumberBases(t *testing.T) {
	for in, want := range map[string]int64{"0o17": 15, "0x10": 16, "1_000": 1000, "10": 10} {
		ps, err := Parse(strings.NewReader("policies:\n- name: p\n  limits:\n  - {algorithm: sliding_log, limit: " + in + ", window: 1m}\n"))
		if err != nil || ps[0].Limits[0].Limit.Limit != want {
			t.Errorf("limit: %s: %v %v, want %d", in, ps, err, want)
		}
	}
	ps, err := Parse(strings.NewReader("policies:\n- name: p\n  limits:\n  - {algorithm: token_bucket, limit: 5, window: 1m, burst: 0}\n"))
	if err != nil || ps[0].Limits[0].Limit.Burst != 0 {
		t.Errorf("burst: 0: %v %v", ps, err)
	}
}

// A file that is not UTF-8 text is refused at the line and column of the
// first byte YAML cannot read: yaml.v3 said only "invalid trailing UTF-8
// octet", nowhere. A file in UTF-16 (with its byte-order mark, as
// PowerShell writes) is read; one larger than MaxFileBytes is refused
// before it is parsed.
func TestParseText(t *testing.T) {
	const file = "policies:\n- name: p\n  # caf\xe9 au lait\n  limits:\n  - {algorithm: sliding_log, limit: 7, window: 1m}\n"
	for in, want := range map[string]string{
		file:                             "line 3, column 8: byte 0xe9 is not UTF-8",
		"policies:\r\n- name: p\xff\r\n": "line 2, column 10: byte 0xff is not UTF-8",
		"policies:\n- name: p\n  limits: []\n\x00":                   "line 4, column 1: control character U+0000",
		"policies:\n- name: \"p\x1b[31m\"\n":                         "line 2, column 11: control character U+001B",
		"policies: []\n#" + strings.Repeat("x", MaxFileBytes) + "\n": "more than 16 MiB",
	} {
		if _, err := Parse(strings.NewReader(in)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%.40q: %v, want %q", in, err, want)
		}
	}
	utf16 := []byte{0xff, 0xfe} // little-endian, as PowerShell's > writes
	for _, r := range "policies:\n- name: caf\u00e9\n  limits:\n  - {algorithm: sliding_log, limit: 7, window: 1m}\n" {
		utf16 = append(utf16, byte(r), byte(r>>8))
	}
	if ps, err := Parse(bytes.NewReader(utf16)); err != nil || ps[0].Name != "caf\u00e9" {
		t.Errorf("UTF-16: %v %v", ps, err)
	}
}

func TestParsePoliciesErrors(t *testing.T) {
	const head = "policies:\n- name: p\n  limits:\n  - {algorithm: sliding_log, limit: 1, window: 1s}\n"
	for _, tc := range []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"empty", "", []string{"empty document"}},
		{"no policies", "policies: []\n", []string{"policies: no policies"}},
		{"two documents", head + "---\n" + head, []string{"more than one YAML document"}},
		{"not a mapping", "- name: p\n", []string{"document: line 1: want a mapping of policies"}},
		{"unknown top-level key", head + "policy: x\n", []string{`document: line 5: unknown field "policy"`}},
		{"unknown policy key", head + "- name: q\n  limit: 10\n", []string{`policies[1]: line 6: unknown field "limit"`, "known: name, mode"}},
		{"unknown limit key", head + "  - {algorithm: sliding_log, limit: 1, windw: 1s}\n", []string{`policies[0].limits[1]: line 5: unknown field "windw"`}},
		{"unknown reduced key", head + "  reduced: {algorithm: gcra, limit: 1, window: 1s, tokens: 3}\n", []string{`policies[0].reduced: line 5: unknown field "tokens"`}},
		{"unknown elastic key", head + "  elastic: {ceiling: 200}\n", []string{`policies[0].elastic: line 5: unknown field "ceiling"`}},
		{"duplicate key", head + "  name: q\n", []string{`policies[0]: line 5: field "name" given twice`}},
		{"bad mode", head + "  mode: strict\n", []string{`policies[0].mode: unknown mode "strict" (hard, soft, shadow, elastic)`}},
		{"bad consistency", head + "  consistency: eventual\n", []string{`policies[0].consistency: unknown consistency "eventual" (strict, fast)`}},
		{"bad algorithm", head + "  - {algorithm: leaky, limit: 1, window: 1s}\n", []string{`policies[0].limits[1].algorithm: unknown algorithm "leaky" (sliding_log,`}},
		{"missing algorithm", head + "  - {limit: 1, window: 1s}\n", []string{`policies[0].limits[1].algorithm: missing`}},
		{"bad calendar", head + "  - {algorithm: fixed_window, limit: 1, calendar: fortnight}\n", []string{`policies[0].limits[1].calendar: unknown calendar unit "fortnight" (minute,`}},
		{"bad window", head + "  - {algorithm: sliding_log, limit: 1, window: 1d}\n", []string{`policies[0].limits[1].window: invalid duration "1d"`}},
		{"window without unit", head + "  - {algorithm: sliding_log, limit: 1, window: 60000}\n", []string{`policies[0].limits[1].window: invalid duration "60000"`}},
		{"negative window", head + "  - {algorithm: sliding_log, limit: 1, window: -1m}\n", []string{`policies[0].limits[1].window: "-1m" is negative`}},
		{"sub-millisecond window", head + "  - {algorithm: sliding_log, limit: 1, window: 1500us}\n", []string{`policies[0].limits[1].window: "1500us" is not a whole number of milliseconds`}},
		{"reduced window", head + "  reduced: {algorithm: sliding_log, limit: 1, window: soon}\n", []string{`policies[0].reduced.window: invalid duration "soon"`}},
		{"wrong type", head + "  - {algorithm: sliding_log, limit: ten, window: 1s}\n", []string{"policies[0].limits[1].limit: line 5: cannot unmarshal !!str `ten` into int64"}},
		{"bool type", head + "  count_denied: maybe\n", []string{"policies[0].count_denied: line 5: cannot unmarshal"}},
		{"fractional limit", head + "  - {algorithm: sliding_log, limit: 1.9, window: 1m}\n", []string{"policies[0].limits[1].limit: line 5: want a whole number, got 1.9"}},
		{"fractional limit without a digit first", head + "  - {algorithm: sliding_log, limit: .5, window: 1m}\n", []string{"policies[0].limits[1].limit: line 5: want a whole number, got .5"}},
		{"fractional exponent limit", head + "  - {algorithm: sliding_log, limit: 15e-1, window: 1m}\n", []string{"policies[0].limits[1].limit: line 5: want a whole number, got 15e-1"}},
		{"fractional burst", head + "  - {algorithm: token_bucket, limit: 5, window: 1m, burst: 7.9}\n", []string{"policies[0].limits[1].burst: line 5: want a whole number, got 7.9"}},
		{"fractional soft_percent", head + "  soft_percent: 10.9\n", []string{"policies[0].soft_percent: line 5: want a whole number, got 10.9"}},
		{"fractional elastic", head + "  elastic: {ceiling_percent: 150.5, capacity: 10}\n", []string{"policies[0].elastic.ceiling_percent: line 5: want a whole number, got 150.5"}},
		{"fractional in JSON", `{"policies": [{"name": "j", "limits": [{"algorithm": "token_bucket", "limit": 7.99, "window": "1m"}]}]}`, []string{"policies[0].limits[0].limit: line 1: want a whole number, got 7.99"}},
		// A leading 0 was read as YAML 1.1's octal: 010 became 8 (and 08 8).
		{"leading zero limit", head + "  - {algorithm: sliding_log, limit: 010, window: 1m}\n", []string{"policies[0].limits[1].limit: line 5: want a decimal number, got 010"}},
		{"leading zero burst", head + "  - {algorithm: token_bucket, limit: 5, window: 1m, burst: 0_100}\n", []string{"policies[0].limits[1].burst: line 5: want a decimal number, got 0_100"}},
		{"leading zero soft_percent", head + "  soft_percent: 08\n", []string{"policies[0].soft_percent: line 5: want a decimal number, got 08"}},
		{"leading zero tagged", head + "  - {algorithm: sliding_log, limit: !!int \"010\", window: 1m}\n", []string{"policies[0].limits[1].limit: line 5: want a decimal number"}},
		// An alias key used to be read by its anchor's name: *limit,
		// where &limit names "p", set the limit.
		{"alias key", "policies:\n- name: &limit p\n  limits:\n  - {algorithm: sliding_log, *limit : 7, window: 1m}\n", []string{`policies[0].limits[0]: line 4: unknown field "p"`}},
		{"mapping key", head + "  ? {a: 1}\n  : 2\n", []string{`policies[0]: line 5: want a field name (name, mode`, "got a mapping"}},
		{"key_by not a list", head + "  key_by: user\n", []string{`policies[0].key_by: line 5: want a list, got "user"`}},
		{"limits not a list", "policies:\n- name: p\n  limits: {algorithm: gcra}\n", []string{"policies[0].limits: line 3: want a list, got a mapping"}},
		{"name not a scalar", "policies:\n- name: [a, b]\n", []string{"policies[0].name: line 2: want a single value, got a list"}},
		{"syntax", "policies: [\n", []string{"yaml:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// A file is one document: empty documents after it (a trailing ---, as
// generators write) are nothing, as in a node's --config file, and a
// second document that holds anything is refused at its line.
func TestParseDocuments(t *testing.T) {
	const head = "policies:\n- name: p\n  limits:\n  - {algorithm: sliding_log, limit: 1, window: 1s}\n"
	for _, tc := range []struct {
		name, in string
		err      string // a substring of the error; "" when it parses
	}{
		{"one", head, ""},
		{"ended with ...", head + "...\n", ""},
		{"a trailing ---", head + "---\n", ""},
		{"a trailing --- without a newline", head + "---", ""},
		{"trailing empty documents and a comment", head + "---\n---\n# the end\n", ""},
		{"a second document", head + "---\n" + head, "line 5: more than one YAML document"},
		{"a second document after an empty one", head + "---\n---\n" + head, "line 6: more than one YAML document"},
		{"a trailing document of a written null", head + "---\n~\n", "line 5: more than one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := Parse(strings.NewReader(tc.in))
			switch {
			case tc.err == "" && (err != nil || len(ps) != 1 || ps[0].Name != "p"):
				t.Fatalf("got %v, %v; want policy p", ps, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// A policy printed as YAML reads back to the same proto, and the printed
// document of the full example reads back to what the example reads to.
func TestPolicyYAMLRoundTrip(t *testing.T) {
	parsed, err := Parse(strings.NewReader(full))
	if err != nil {
		t.Fatal(err)
	}
	policies := append(parsed,
		&pb.Policy{Name: "shadow", Mode: pb.Mode_MODE_SHADOW, Limits: []*pb.PolicyLimit{
			limit("a", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1, WindowMs: 5_400_000}),
			limit("", &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 2, WindowMs: 1, Calendar: pb.CalendarUnit_CALENDAR_UNIT_YEAR}),
			limit("b:c", &pb.Limit{Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 3, WindowMs: 31_536_000_000, Burst: 9}),
			limit("", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 4, WindowMs: 90_061_001, Buckets: 7}),
		}},
		&pb.Policy{Name: "empty-elastic", Elastic: &pb.Elastic{}, KeyBy: []string{"tenant"}},
	)
	var b bytes.Buffer
	if err := Write(&b, policies); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(&b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(back) != len(policies) {
		t.Fatalf("got %d policies back, want %d", len(back), len(policies))
	}
	for i := range back {
		if !proto.Equal(back[i], policies[i]) {
			t.Errorf("policy %d:\n got %v\nwant %v", i, back[i], policies[i])
		}
	}
}

func TestWritePoliciesFormat(t *testing.T) {
	var b bytes.Buffer
	err := Write(&b, []*pb.Policy{{
		Name: "api", KeyBy: []string{"user", "ip"},
		Limits: []*pb.PolicyLimit{
			limit("per-minute", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}),
			limit("", &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 20000, Calendar: pb.CalendarUnit_CALENDAR_UNIT_MONTH}),
		},
		Reduced: limit("slow-lane", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 10, WindowMs: 5_400_000, Buckets: 60}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `policies:
  - name: api
    mode: hard
    consistency: strict
    key_by: [user, ip]
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 10, window: 1m}
      - {algorithm: fixed_window, limit: 20000, calendar: month}
    reduced: {name: slow-lane, algorithm: sliding_counter, limit: 10, window: 1h30m, buckets: 60}
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestFormatWindow(t *testing.T) {
	for ms, want := range map[int64]string{
		1: "1ms", 1500: "1.5s", 60_000: "1m", 3_600_000: "1h", 5_400_000: "1h30m", 5_401_000: "1h30m1s",
		86_400_000: "24h", 90_000: "1m30s", 3_660_000: "1h1m",
	} {
		if got := formatWindow(ms); got != want {
			t.Errorf("formatWindow(%d) = %q, want %q", ms, got, want)
		}
	}
}

func TestPrintPolicies(t *testing.T) {
	var b bytes.Buffer
	err := Table(&b, []*pb.Policy{{
		Name: "api", Mode: pb.Mode_MODE_SOFT, SoftPercent: 10, KeyBy: []string{"user", "ip"},
		Limits: []*pb.PolicyLimit{
			limit("", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}),
			limit("", &pb.Limit{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 500, WindowMs: 3_600_000}),
		},
	}, {
		Name: "monthly", Consistency: pb.Consistency_CONSISTENCY_FAST,
		Limits:  []*pb.PolicyLimit{limit("", &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 20000, Calendar: pb.CalendarUnit_CALENDAR_UNIT_MONTH})},
		Reduced: limit("", &pb.Limit{Algorithm: pb.Algorithm_GCRA, Limit: 1, WindowMs: 1000}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{
		"NAME", "KEY_BY", "soft +10%", "10/1m sliding_log, 500/1h sliding_counter", "user,ip",
		"fast", "20000/month fixed_window", "1/1s gcra",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
}
