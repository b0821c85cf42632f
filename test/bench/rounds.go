package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Rounds. Every figure of the bench is a ratio to the health check, and
// this machine's speed moves by a fifth or more from one measurement to the
// next, within one run and one cluster (strict Allow via ghz, four health
// and strict pairs back to back: 0.31×, 0.25×, 0.24×, 0.22×). A figure
// from one measurement of each then says as much about the moment as about
// floodgate, and a target met in one run is missed in the next. So the
// comparisons run in rounds: each round measures the health check and then
// every workload once; each workload's figure is taken against the health
// check of its own round; its row shows the round whose figure is the
// median, and the spread of all rounds.

// sample is one round's result of a workload with the health result of the
// same round.
type sample struct{ res, health *result }

// measurement is one load the rounds run, named for the progress lines:
// it returns the load's result.
type measurement struct {
	name string
	run  func(round int) (*result, error)
}

// inRounds runs health and then every load, rounds times over, printing
// each result as it comes. It returns the health results of every round
// and, per load, its samples; a load that failed in any round has nil
// samples and its first error. Only a failed health check ends the
// rounds: nothing can be compared without it.
func inRounds(out io.Writer, rounds int, health measurement, loads []measurement) ([]*result, [][]sample, []error, error) {
	var healths []*result
	samples := make([][]sample, len(loads))
	errs := make([]error, len(loads))
	progress := func(round int, name string, res *result, err error) {
		line := fmt.Sprintf("  round %d/%d %-44s ", round+1, rounds, name)
		if err != nil {
			line += "failed: " + oneLine(err.Error(), 120)
		} else {
			line += res.String()
		}
		fmt.Fprintln(out, line)
	}
	for round := range rounds {
		h, err := health.run(round)
		progress(round, health.name, h, err)
		if err != nil {
			return nil, nil, nil, err
		}
		healths = append(healths, h)
		for i, load := range loads {
			if errs[i] != nil {
				continue // failed in an earlier round: not measured again
			}
			res, err := load.run(round)
			progress(round, load.name, res, err)
			if err != nil {
				errs[i], samples[i] = err, nil
				continue
			}
			samples[i] = append(samples[i], sample{res: res, health: h})
		}
	}
	return healths, samples, errs, nil
}

// firstRound wraps a profile's start so that only the first round is
// profiled (the profiles of later rounds would replace it).
func firstRound(prof *profiler, round int, name string) func() {
	if round > 0 {
		return func() {}
	}
	return prof.start(name)
}

// median returns the sample whose key is the median of all samples' keys
// (of an even number, the lower of the two middle ones) and the least and
// greatest key. samples must not be empty.
func median(samples []sample, key func(sample) float64) (mid sample, lo, hi float64) {
	sorted := slices.Clone(samples)
	slices.SortStableFunc(sorted, func(a, b sample) int {
		ka, kb := key(a), key(b)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return sorted[(len(sorted)-1)/2], key(sorted[0]), key(sorted[len(sorted)-1])
}

// medianHealth is the health result of the median round by calls/s, with
// the spread of all rounds in its row's figure.
func medianHealth(workload, client string, healths []*result) (*result, row) {
	samples := make([]sample, len(healths))
	for i, h := range healths {
		samples[i] = sample{res: h, health: h}
	}
	mid, lo, hi := median(samples, func(s sample) float64 { return s.res.callsPerSec() })
	r := healthRow(workload, client, mid.res)
	if len(healths) > 1 {
		r.figure += fmt.Sprintf("; %d rounds %s–%s/s", len(healths), thousands(lo), thousands(hi))
	}
	return mid.res, r
}

// key is the figure of w that its target is about, in one sample: the
// ratio of its rate to health's, or its p99 at a held rate (seconds).
func (w workload) key(s sample) float64 {
	switch {
	case w.rps > 0:
		return s.res.p99.Seconds()
	case w.batch > 0:
		return ratio(s.res.decisionsPerSec(), s.health.callsPerSec())
	}
	return ratio(s.res.callsPerSec(), s.health.callsPerSec())
}

// spread prints the least and greatest key of w's rounds.
func (w workload) spread(lo, hi float64) string {
	if w.rps > 0 {
		return fmt.Sprintf("p99 %s–%s", fmtDur(time.Duration(lo*float64(time.Second))), fmtDur(time.Duration(hi*float64(time.Second))))
	}
	return fmt.Sprintf("%.2f–%.2f×", lo, hi)
}

// judgeRounds makes the row of w from its samples: the median round's row,
// judged alone, with the spread of the rounds. It returns the median
// sample too.
func (w workload) judgeRounds(client string, samples []sample) (row, sample) {
	mid, lo, hi := median(samples, w.key)
	r := w.judge(client, mid.res, mid.health)
	if len(samples) > 1 {
		r.figure += fmt.Sprintf("; %d rounds %s", len(samples), w.spread(lo, hi))
	}
	return r, mid
}
