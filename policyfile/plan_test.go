package policyfile

import (
	"bytes"
	"strings"
	"testing"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

func parse(t *testing.T, doc string) []*pb.Policy {
	t.Helper()
	ps, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// asStored is what the cluster answers ListPolicies with after storing ps.
func asStored(t *testing.T, ps []*pb.Policy) []*pb.Policy {
	t.Helper()
	stored, err := validate.Policies(ps, window.DefaultMaxLogLength)
	if err != nil {
		t.Fatal(err)
	}
	var out []*pb.Policy
	for _, p := range stored {
		out = append(out, validate.PolicyToProto(p))
	}
	return out
}

const base = `
policies:
  - name: login
    key_by: [user]
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 3, window: 1m}
  - name: api
    limits:
      - {name: per-second, algorithm: token_bucket, limit: 100, window: 1s}
  - name: search
    limits:
      - {name: per-minute, algorithm: sliding_counter, limit: 60, window: 1m}
`

func TestDiff(t *testing.T) {
	current := asStored(t, parse(t, base))
	desired := parse(t, `
policies:
  - name: login
    key_by: [user]
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 3, window: 1m}
  - name: api
    limits:
      - {name: per-second, algorithm: token_bucket, limit: 200, window: 1s}
  - name: export
    limits:
      - {name: per-hour, algorithm: fixed_window, limit: 5, window: 1h}
`)
	plan := Diff(current, desired, false)
	if strings.Join(plan.Create, ",") != "export" || strings.Join(plan.Update, ",") != "api" ||
		strings.Join(plan.Unchanged, ",") != "login" || len(plan.Delete) != 0 || len(plan.Set) != 2 {
		t.Fatalf("plan %+v", plan)
	}
	pruned := Diff(current, desired, true)
	if strings.Join(pruned.Delete, ",") != "search" {
		t.Fatalf("prune deletes %v, want search", pruned.Delete)
	}
	var b bytes.Buffer
	if err := pruned.Print(&b); err != nil {
		t.Fatal(err)
	}
	if b.String() != "+ export\n~ api\n- search\n= login\n" {
		t.Fatalf("printed %q", b.String())
	}
}

// A file applied twice changes nothing the second time, although the
// cluster spells defaults out (algorithm, buckets, modes).
func TestDiffOfTheSameFileIsEmpty(t *testing.T) {
	ps := parse(t, base)
	if plan := Diff(asStored(t, ps), ps, true); !plan.Empty() || len(plan.Unchanged) != 3 {
		t.Fatalf("plan %+v", plan)
	}
	if len(Diff(nil, ps, false).Create) != 3 {
		t.Fatal("an empty cluster creates every policy")
	}
}

// A file that flips colocate on a policy of the cluster is one the
// cluster refuses whole: the plan says so, for a dry run too.
func TestDiffFindsAColocateChange(t *testing.T) {
	current := asStored(t, parse(t, base))
	desired := parse(t, `
policies:
  - name: login
    key_by: [user]
    colocate: true
    limits:
      - {name: per-minute, algorithm: sliding_log, limit: 3, window: 1m}
`)
	plan := Diff(current, desired, false)
	if len(plan.Refused) != 1 || plan.Refused[0].Name != "login" || !strings.HasPrefix(plan.Refused[0].Error(), "policies[0].colocate: policy login exists with colocate false") {
		t.Fatalf("refused %v", plan.Refused)
	}
	if other := Diff(current, parse(t, base), false); len(other.Refused) != 0 {
		t.Fatalf("refused %v", other.Refused)
	}
}

func TestCheckNamesTheField(t *testing.T) {
	for doc, want := range map[string]string{
		"policies:\n  - name: a\n    limits: [{algorithm: fixed_window, limit: 0, window: 1m}]\n":                                                                             "policies[0].limits[0]",
		"policies:\n  - name: a\n    limits: [{algorithm: fixed_window, limit: 1, window: 1m}]\n  - name: a\n    limits: [{algorithm: fixed_window, limit: 1, window: 1m}]\n": "policies[1].name",
	} {
		err := Check(parse(t, doc), 0)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error naming %s", doc, err, want)
		}
	}
	if err := Check(parse(t, base), 0); err != nil {
		t.Fatal(err)
	}
	// The cap on sliding logs is a node's: its default, or the node's own
	// to judge.
	long := parse(t, "policies: [{name: a, limits: [{algorithm: sliding_log, limit: 20000, window: 1m}]}]")
	if err := Check(long, 0); err == nil || !strings.Contains(err.Error(), "policies[0].limits[0].limit: a sliding_log") {
		t.Errorf("a log of 20000 under the default cap: %v", err)
	}
	if err := Check(long, window.MaxLogLength); err != nil {
		t.Errorf("a log of 20000 left to the node: %v", err)
	}
}
