package client

import (
	"errors"
	"time"
)

// stallAfter is how long a node may leave every call a lane has in flight
// unanswered before the lane counts as stalled. A node answers a check
// in milliseconds; one that says nothing for this long is paused, cut
// off, or waiting on a dead disk, and its connection stays up, so only
// the call's own deadline (CallTimeout) would end the wait.
const stallAfter = 500 * time.Millisecond

// errStalled answers a check that was not sent because its node's lane is
// stalled: nothing was counted, and Client.allow sends it through another
// node, which forwards it to its group's leader (the nodes learn of a new
// leader at its election, the client only at its next refresh).
var errStalled = errors.New("floodgate: the node has answered nothing for a while; check not sent")

// watchStall starts l's stall watch, unless it runs: the caller has just
// put a call in flight (at now), and holds co.mu. The watch runs while
// calls are in flight and looks once per stallAfter at most, whatever the
// load: one timer per lane, reset, never made again.
func (co *coalescer) watchStall(l *lane, now time.Time) {
	if l.busy == 1 {
		l.busySince = now // the lane was idle: its silence starts now
	}
	if l.watching {
		return
	}
	l.watching = true
	if l.watch == nil {
		l.watch = time.AfterFunc(stallAfter, func() { co.lookForStall(l) })
		return
	}
	l.watch.Reset(stallAfter)
}

// lookForStall is the watch of l. A lane whose calls have all gone
// unanswered for stallAfter is stalled: the checks queued in it are
// answered errStalled (they were never sent) and so is every check sent
// to it until one of its calls comes back; onStall hears of it at each
// look while it lasts, so that the client refreshes its routes.
func (co *coalescer) lookForStall(l *lane) {
	co.mu.Lock()
	if l.busy == 0 {
		l.watching = false
		co.mu.Unlock()
		return
	}
	quiet := time.Since(l.busySince)
	if !l.backAt.IsZero() && l.backAt.After(l.busySince) {
		quiet = time.Since(l.backAt)
	}
	var out []*waiter
	if quiet >= stallAfter && !l.stalled {
		l.stalled = true
		out, l.queue = l.queue, nil
	}
	stalled := l.stalled
	next := stallAfter
	if !stalled {
		next = stallAfter - quiet
	}
	l.watch.Reset(next)
	co.mu.Unlock()
	for _, w := range out {
		w.err = errStalled
		close(w.done)
	}
	if stalled && co.onStall != nil {
		co.onStall()
	}
}

// stalledAddrs returns the addresses of the stalled lanes.
func (co *coalescer) stalledAddrs() map[string]bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	var out map[string]bool
	for addr, l := range co.lanes {
		if l.stalled {
			if out == nil {
				out = map[string]bool{}
			}
			out[addr] = true
		}
	}
	return out
}
