package gctune

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Percent is the GOGC value that lets a heap of live bytes grow by at
// least headroom before the next collection: 100 (Go's default) once the
// live heap is larger than headroom, more below, at most maxPercent.
func Percent(live, headroom uint64) int {
	const maxPercent = 2000
	if live == 0 {
		return maxPercent
	}
	p := headroom * 100 / live
	return int(min(max(p, 100), maxPercent))
}

// Active reports whether Run tunes the collector: with headroom, and
// unless the operator set GOGC (theirs wins). GOMEMLIMIT does not turn it
// off: the runtime collects at the lesser of the GOGC target and the
// limit, so the limit stays a ceiling (a container's, in Kubernetes) and
// a small heap still gets its headroom below it.
func Active(headroom uint64, getenv func(string) string) bool {
	return headroom != 0 && getenv("GOGC") == ""
}

// Run keeps the collector's target at Percent of the live heap, checked
// every interval, until ctx ends, when Active.
func Run(ctx context.Context, headroom uint64, interval time.Duration) {
	if !Active(headroom, os.Getenv) {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	last := -1
	apply := func() {
		metrics.Read(sample)
		var live uint64
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = sample[0].Value.Uint64()
		}
		if p := Percent(live, headroom); p != last {
			debug.SetGCPercent(p)
			last = p
		}
	}
	apply()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			apply()
		}
	}
}
