package policyfile

import (
	"fmt"
	"strings"
	"testing"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/fuzzseed"
)

// aliasBomb is a one-line file of n aliases of a policy that holds n
// aliases of a limit: a few kilobytes that decode to n² limits.
func aliasBomb(n int) string {
	return "policies: [&p {name: a, limits: [&l {algorithm: gcra, limit: 5, window: 1s}" +
		strings.Repeat(", *l", n) + "]}" + strings.Repeat(", *p", n) + "]\n"
}

// A file whose aliases repeat far more than it holds is refused at the
// alias, cheaply; anchors used as people use them still parse, up to a
// thousand policies sharing one list of eight limits.
func TestParseAliases(t *testing.T) {
	var shared strings.Builder
	shared.WriteString("policies:\n  - name: p0\n    limits: &std\n")
	for i := range 8 {
		fmt.Fprintf(&shared, "      - {name: l%d, algorithm: sliding_counter, limit: 100, window: %dh, buckets: 60}\n", i, i+1)
	}
	shared.WriteString("    reduced: &slow {name: slow, algorithm: sliding_log, limit: 10, window: 1m}\n")
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&shared, "  - {name: p%d, key_by: [user, ip], limits: *std, reduced: *slow}\n", i)
	}
	for _, tc := range []struct {
		name, doc string
		policies  int    // parsed, when no error is wanted
		err       string // a substring of the error
	}{
		{"an anchored limit used twice", "policies:\n  - name: a\n    limits:\n      - &m {algorithm: sliding_log, limit: 10, window: 1m}\n" +
			"    reduced: *m\n  - name: b\n    limits: [*m]\n", 2, ""},
		{"a thousand policies share their limits", shared.String(), 1000, ""},
		// Before the bound: 360,000 limits, seconds and hundreds of
		// megabytes (3000 aliases, 18 KB, ran out of memory).
		{"alias bomb", aliasBomb(600), 0, "line 1: too many alias expansions (a YAML alias bomb?)"},
		{"alias bomb over lines", strings.ReplaceAll(aliasBomb(600), ", *p", ",\n  *p"), 0, "too many alias expansions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*pb.Policy
			var err error
			// What decoding allocates is bounded by the file: a few MB
			// here, where the bomb took hundreds before the bound.
			fuzzseed.CheckAllocs(t, []byte(tc.doc), 4<<20, 2<<10, func() { ps, err = Parse(strings.NewReader(tc.doc)) })
			if tc.err == "" {
				if err != nil || len(ps) != tc.policies {
					t.Fatalf("parsed %d policies, %v; want %d", len(ps), err, tc.policies)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "policies[") {
				t.Fatalf("error %v, want one naming the policy and containing %q", err, tc.err)
			}
		})
	}
}
