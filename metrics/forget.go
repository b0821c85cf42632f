package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Inline is the policy label of decisions made under an inline limit.
const Inline = "inline"

// ForgetPolicies deletes the Decisions series of every named policy and
// limit for which has reports false: a deleted policy's series, or a
// renamed or removed limit's, would otherwise stay for the life of the
// process, and policies are created and deleted by name (one per tenant,
// say), so the series would grow with every name ever used. The series of
// inline limits are kept.
func ForgetPolicies(has func(policy, limit string) bool) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		Decisions.Collect(ch)
		close(ch)
	}()
	gone := map[[2]string]bool{}
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		var pl [2]string // policy, limit
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "policy":
				pl[0] = l.GetValue()
			case "limit":
				pl[1] = l.GetValue()
			}
		}
		if pl[0] != Inline && !has(pl[0], pl[1]) {
			gone[pl] = true
		}
	}
	for pl := range gone {
		Decisions.DeletePartialMatch(prometheus.Labels{"policy": pl[0], "limit": pl[1]})
	}
}
