package policyfile

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/test/fuzzseed"
)

// yamlSeeds are policy documents: every field, the shortest one, each
// kind of mistake the parser names, YAML's own devices (anchors, aliases,
// tags, several documents) and truncations of the full document.
func yamlSeeds() []fuzzseed.Seed {
	doc := func(s string) []byte { return []byte(s) }
	seeds := []fuzzseed.Seed{
		{Name: "full", Data: doc(full)},
		{Name: "minimal", Data: doc("policies: [{name: a, limits: [{algorithm: gcra, limit: 1, window: 1s}]}]\n")},
		{Name: "empty", Data: nil},
		{Name: "empty-list", Data: doc("policies: []\n")},
		{Name: "unknown-field", Data: doc("policies:\n  - name: a\n    limts: []\n")},
		{Name: "field-twice", Data: doc("policies:\n  - {name: a, name: b}\n")},
		{Name: "two-documents", Data: doc("policies: []\n---\npolicies: []\n")},
		{Name: "wrong-kinds", Data: doc("policies: {name: a}\n")},
		{Name: "scalar-for-list", Data: doc("policies:\n  - name: a\n    key_by: user\n")},
		{Name: "bad-enums", Data: doc("policies: [{name: a, mode: loose, consistency: eventual, limits: [{algorithm: leaky, limit: 1, calendar: fortnight}]}]\n")},
		{Name: "bad-windows", Data: doc("policies: [{name: a, limits: [{algorithm: sliding_log, limit: 1, window: 1.5ms}, {algorithm: gcra, limit: 1, window: -1s}, {algorithm: gcra, limit: 1, window: 300000h}]}]\n")},
		{Name: "huge-numbers", Data: doc("policies: [{name: a, soft_percent: 99999999999999999999, limits: [{algorithm: gcra, limit: 9223372036854775807, buckets: 2147483648}]}]\n")},
		{Name: "anchors", Data: doc("x: &l {algorithm: sliding_log, limit: 1, window: 1m}\npolicies: [{name: a, limits: [*l, *l]}, {name: b, limits: [*l], reduced: *l}]\n")},
		{Name: "self-alias", Data: doc("policies: &p [*p]\n")},
		{Name: "alias-bomb", Data: doc(aliasBomb(300))},
		{Name: "tags", Data: doc("policies: [{name: !!str 1, count_denied: !!bool true, limits: [{algorithm: !!str gcra, limit: !!int 1}]}]\n")},
		{Name: "nulls", Data: doc("policies: [{name: ~, elastic: null, reduced: ~, limits: [{algorithm: gcra, limit: 1}]}]\n")},
		{Name: "quoted-names", Data: doc("policies: [{name: \"a\\x00b\\u00e9\", key_by: ['', \"\\t\"], limits: [{algorithm: gcra, limit: 1}]}]\n")},
	}
	return append(seeds, fuzzseed.Truncations("full", []byte(full), 37)...)
}

// FuzzParse parses any document. It must not panic, and a
// document it accepts must print (`policy get` format) as one it reads
// back to the same policies, printing the same again.
func FuzzParse(f *testing.F) {
	fuzzseed.Add(f, yamlSeeds())
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 16<<10 {
			return // bigger inputs only slow the fuzzer down
		}
		got, err := Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		var printed bytes.Buffer
		if err := Write(&printed, got); err != nil {
			t.Fatalf("printing parsed policies: %v", err)
		}
		again, err := Parse(bytes.NewReader(printed.Bytes()))
		if err != nil {
			t.Fatalf("printed policies do not parse: %v\n%s", err, printed.Bytes())
		}
		if len(again) != len(got) {
			t.Fatalf("%d policies read back as %d", len(got), len(again))
		}
		for i := range got {
			if !proto.Equal(got[i], again[i]) {
				t.Fatalf("policy %d read back as\n%v\nnot\n%v\nprinted as\n%s", i, again[i], got[i], printed.Bytes())
			}
		}
		var twice bytes.Buffer
		if err := Write(&twice, again); err != nil || !bytes.Equal(twice.Bytes(), printed.Bytes()) {
			t.Fatalf("printing is not stable (%v):\n%s\n%s", err, printed.Bytes(), twice.Bytes())
		}
	})
}
