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

// Run keeps the collector's target at Percent of the live heap, checked
// every interval, until ctx ends. It does nothing when headroom is 0 or
// when the operator set GOGC or GOMEMLIMIT: theirs wins.
func Run(ctx context.Context, headroom uint64, interval time.Duration) {
	if headroom == 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
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
