package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Inline is the policy label of decisions made under an inline limit.
const Inline = "inline"

// ForgetPolicies deletes the Decisions series of every named policy that
// has reports false: a deleted policy's series would otherwise stay for
// the life of the process, and policies are created and deleted by name
// (one per tenant, say), so the series would grow with every name ever
// used. The series of inline limits are kept.
func ForgetPolicies(has func(name string) bool) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		Decisions.Collect(ch)
		close(ch)
	}()
	gone := map[string]bool{}
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if name := l.GetValue(); l.GetName() == "policy" && name != Inline && !has(name) {
				gone[name] = true
			}
		}
	}
	for name := range gone {
		Decisions.DeletePartialMatch(prometheus.Labels{"policy": name})
	}
}
