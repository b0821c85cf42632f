package main

import (
	"fmt"
	"io"
	"strings"
)

// verdict says whether a figure meets its target.
type verdict int

const (
	noTarget verdict = iota
	met
	notMet
)

func (v verdict) String() string {
	switch v {
	case met:
		return "met"
	case notMet:
		return "**not met**"
	}
	return ""
}

// judge is met when ok holds.
func judge(ok bool) verdict {
	if ok {
		return met
	}
	return notMet
}

// row is one line of the results table.
type row struct {
	workload string
	client   string
	res      *result // nil for rows that are not a load (idle, failover, ...)
	figure   string  // the figure the target is about, e.g. "0.42× health"
	target   string
	verdict  verdict
}

// report collects the rows of a run, printing each as it is measured, and
// prints the table at the end.
type report struct {
	out    io.Writer
	header []string
	rows   []row
	notes  []string
}

// add records r and prints its progress line.
func (rp *report) add(r row) {
	rp.rows = append(rp.rows, r)
	line := fmt.Sprintf("  %-44s %-14s", r.workload, r.client)
	if r.res != nil {
		line += " " + r.res.String()
	}
	if r.figure != "" {
		line += "  → " + r.figure
	}
	if r.verdict != noTarget {
		line += fmt.Sprintf(" (target %s: %s)", r.target, strings.Trim(r.verdict.String(), "*"))
	}
	fmt.Fprintln(rp.out, line)
}

// note adds a line printed under the table.
func (rp *report) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	rp.notes = append(rp.notes, s)
	fmt.Fprintln(rp.out, "  note:", s)
}

// failed records a workload that could not be measured at all.
func (rp *report) failed(workload, client, target string, err error) {
	rp.add(row{workload: workload, client: client, figure: "failed: " + oneLine(err.Error(), 120),
		target: target, verdict: judgeFailed(target)})
}

func judgeFailed(target string) verdict {
	if target == "" {
		return noTarget
	}
	return notMet
}

// print writes the Markdown table, ready to paste into the README.
func (rp *report) print() {
	w := rp.out
	fmt.Fprintln(w)
	for _, h := range rp.header {
		fmt.Fprintln(w, h)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| workload | client | calls/s | decisions/s | p50 | p99 | figure | target | |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---|---|")
	for _, r := range rp.rows {
		var calls, decisions, p50, p99 string
		if r.res != nil {
			calls = thousands(r.res.callsPerSec())
			if r.res.decisions != r.res.calls-r.res.errors {
				decisions = thousands(r.res.decisionsPerSec())
			}
			p50, p99 = fmtDur(r.res.p50), fmtDur(r.res.p99)
		}
		fig := r.figure
		if r.res != nil && r.res.errors > 0 {
			fig = strings.TrimSpace(fmt.Sprintf("%s (%.1f%% errors)", fig, 100*r.res.errorShare()))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.workload, r.client, calls, decisions, p50, p99, fig, r.target, r.verdict)
	}
	if len(rp.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range rp.notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
	var metN, total int
	for _, r := range rp.rows {
		if r.verdict != noTarget {
			total++
			if r.verdict == met {
				metN++
			}
		}
	}
	fmt.Fprintf(w, "\n%d of %d targets met.\n", metN, total)
}

// thousands prints n rounded, with thousands separators.
func thousands(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// oneLine keeps the first line of s, at most n bytes, and escapes table
// separators.
func oneLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}
