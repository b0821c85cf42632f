package fault

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Percentiles returns the median and the maximum of ds (zeros when empty).
func Percentiles(ds []time.Duration) (p50, maxd time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2], s[len(s)-1]
}

// measured returns the failover times, and how many faults the hot shard
// never answered after.
func (r Report) measured() (ds []time.Duration, missing int) {
	for i := range r.Faults {
		switch {
		case r.Failovers[i] < 0:
			missing++
		default:
			ds = append(ds, r.Failovers[i])
		}
	}
	return ds, missing
}

// Detail is the scenario's report for the test log: faults, keys,
// violations.
func (r Report) Detail() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s: %s of load, %d calls recorded; left out: %d failed to dial, %d refused by a starting node\n",
		r.Name, r.Duration.Round(100*time.Millisecond), r.calls(), r.NotSent, r.Refused)
	for i, f := range r.Faults {
		fmt.Fprintf(&b, "  fault %s", f)
		if r.Failovers[i] < 0 {
			b.WriteString("; hot shard never answered again")
		} else {
			fmt.Fprintf(&b, "; hot shard answered again after %s", r.Failovers[i].Round(time.Millisecond))
		}
		b.WriteString("\n")
	}
	for _, k := range r.Keys {
		fmt.Fprintf(&b, "  key %s (shard %d): %d calls, %d allowed / %d denied / %d unknown, admitted %d, final %d, unknown cost %d, linearizable %s\n",
			k.Key, k.Shard, k.Ops, k.Allowed, k.Denied, k.Unk, k.Admitted, k.Final, sum(k.Ambiguous), k.Lin)
	}
	fmt.Fprintf(&b, "  longest gap between answers on the hot shard: %s, ending at %s\n", r.LongestGap.Round(time.Millisecond), r.GapEnd.Round(time.Millisecond))
	errs := map[string]int{}
	for _, k := range r.Keys {
		for e, n := range k.Errors {
			errs[e] += n
		}
	}
	for _, e := range slices.Sorted(maps.Keys(errs)) {
		fmt.Fprintf(&b, "  %d× %s\n", errs[e], e)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  VIOLATION %s\n", v)
	}
	return b.String()
}

// Table formats reports as a Markdown table for the README.
func Table(reports []Report) string {
	var b strings.Builder
	b.WriteString("| scenario | load | calls (allowed / denied / unknown) | faults | failover p50 / max | longest gap | violations |\n")
	b.WriteString("|---|---:|---:|---|---:|---:|---:|\n")
	for _, r := range reports {
		var al, de, un int
		for _, k := range r.Keys {
			al, de, un = al+k.Allowed, de+k.Denied, un+k.Unk
		}
		kinds := map[string]int{}
		var order []string
		for _, f := range r.Faults {
			kind, _, _ := strings.Cut(f.Kind, " ")
			if kinds[kind] == 0 {
				order = append(order, kind)
			}
			kinds[kind]++
		}
		var fs []string
		for _, k := range order {
			fs = append(fs, fmt.Sprintf("%d× %s", kinds[k], k))
		}
		fo := "–"
		if ds, missing := r.measured(); len(ds) > 0 || missing > 0 {
			p50, mx := Percentiles(ds)
			fo = fmt.Sprintf("%s / %s", p50.Round(10*time.Millisecond), mx.Round(10*time.Millisecond))
			if missing > 0 {
				fo += fmt.Sprintf(" (%d never)", missing)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d (%d / %d / %d) | %s | %s | %s | %d |\n",
			r.Name, r.Duration.Round(time.Second), al+de+un, al, de, un, strings.Join(fs, ", "), fo,
			r.LongestGap.Round(10*time.Millisecond), len(r.Violations))
	}
	return b.String()
}

func (r Report) calls() int {
	n := 0
	for _, k := range r.Keys {
		n += k.Ops
	}
	return n
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
