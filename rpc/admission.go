package rpc

import (
	"fmt"
	"sync/atomic"

	"github.com/floodgate/floodgate/metrics"
)

// DefaultMaxChecksWaiting is --max-checks-waiting's default: about two
// seconds of what a busy node of a small machine decides in batches
// (45,000 a second in make bench), the most a caller's check could wait
// (--leader-wait) and still be answered.
const DefaultMaxChecksWaiting = 100_000

// admission bounds the checks a node's entry points took and have not
// answered yet (--max-checks-waiting). A check waits for its group's
// commit; callers that arrive faster than the groups commit would
// otherwise pile up without bound, each holding its request, a goroutine
// and its place in a batch, until the node runs out of memory or every
// check waits out its deadline. Past the bound a check is refused at
// once, Unavailable and counted nowhere, so its caller's fail-open or
// fail-closed rule decides and the checks already waiting are answered.
type admission struct {
	max     int64 // 0: no bound
	waiting atomic.Int64
}

// take reserves room for n checks, reporting false (nothing reserved) when
// the node waits on its bound already. A dispatch that finds room is taken
// whole, whatever its size, so the bound may be passed by one dispatch (a
// batch of up to 1,000): judged by whether it fits, a large batch would
// be refused for as long as small checks kept the node near its bound.
func (a *admission) take(n int) bool {
	w := a.waiting.Add(int64(n))
	if a.max > 0 && w-int64(n) >= a.max {
		a.waiting.Add(-int64(n))
		metrics.ChecksShed.WithLabelValues(metrics.ShedMaxWaiting).Add(float64(n))
		return false
	}
	metrics.ChecksWaiting.Add(float64(n))
	return true
}

// release gives back the room of n checks take reserved.
func (a *admission) release(n int) {
	a.waiting.Add(-int64(n))
	metrics.ChecksWaiting.Sub(float64(n))
}

// overloaded is the error of checks take refused.
func (a *admission) overloaded() error {
	return fmt.Errorf("%w: it waits on as many checks as --max-checks-waiting allows (%d) already; this one was not counted: retry after a backoff, or on another node",
		ErrOverloaded, a.max)
}
