package metrics

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// policyLabels lists the policy label of every Decisions series.
func policyLabels(t *testing.T) []string { return decisionLabels(t, "policy") }

// decisionLabels lists the label name of every Decisions series, sorted.
func decisionLabels(t *testing.T, name string) []string {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() {
		Decisions.Collect(ch)
		close(ch)
	}()
	var out []string
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == name {
				out = append(out, l.GetValue())
			}
		}
	}
	slices.Sort(out)
	return out
}

// The series of a policy that is gone are deleted, every one of them
// (each limit, outcome and consistency); those of policies still there,
// and of inline limits, stay.
func TestForgetPoliciesDeletesTheSeriesOfPoliciesGone(t *testing.T) {
	Decisions.Reset()
	t.Cleanup(Decisions.Reset)
	Decisions.WithLabelValues("tenant-a", "minute", Allowed, "strict").Inc()
	Decisions.WithLabelValues("tenant-b", "minute", Allowed, "strict").Inc()
	Decisions.WithLabelValues("tenant-b", "hour", Denied, "fast").Inc()
	Decisions.WithLabelValues(Inline, "limits[0]", Allowed, "strict").Inc()
	ForgetPolicies(func(name, _ string) bool { return name == "tenant-a" })
	if got, want := policyLabels(t), []string{Inline, "tenant-a"}; !slices.Equal(got, want) {
		t.Fatalf("series of policies %v, want %v", got, want)
	}
	ForgetPolicies(func(string, string) bool { return false })
	if got, want := policyLabels(t), []string{Inline}; !slices.Equal(got, want) {
		t.Fatalf("series of policies %v, want %v", got, want)
	}
}

// A limit renamed or removed takes its series with it; the policy's other
// limits keep theirs.
func TestForgetPoliciesDeletesTheSeriesOfLimitsGone(t *testing.T) {
	Decisions.Reset()
	t.Cleanup(Decisions.Reset)
	Decisions.WithLabelValues("ren", "alpha", Allowed, "strict").Inc()
	Decisions.WithLabelValues("ren", "alpha", Denied, "strict").Inc()
	Decisions.WithLabelValues("ren", "day", Allowed, "strict").Inc()
	ForgetPolicies(func(name, limit string) bool { return name == "ren" && (limit == "beta" || limit == "day") })
	limits := decisionLabels(t, "limit")
	if !slices.Equal(limits, []string{"day"}) {
		t.Fatalf("series of limits %v, want [day]", limits)
	}
}
