package client

import (
	"context"
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
// stalled: nothing was counted, and Client.coalesced sends it through
// another node, which forwards it to its group's leader (the nodes learn
// of a new leader at its election, the client only at its next refresh).
var errStalled = errors.New("floodgate: the node has answered nothing for a while; check not sent")

// watchStall starts l's stall watch, unless it runs: the caller has just
// put a call in flight (at now), and holds co.mu. The watch runs while
// calls are in flight and looks once per stallAfter at most, whatever the
// load: one timer per lane, reset, never made again.
func (co *coalescer) watchStall(l *lane, now time.Time) {
	if l.busy == 1 {
		l.busySince = now // the lane was idle: its silence starts now
	}
	if l.watching || co.closed {
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
// to it, until word comes from its node: a call answered by it, or the
// probe (a health check) sent at each look while the lane is stalled.
// onStall hears of it at each look, so that the client refreshes its
// routes. A call that ends by its callers' own deadline is no word from
// the node: a paused node's calls all end so, and would otherwise make
// way for the next check to wait on it in turn.
func (co *coalescer) lookForStall(l *lane) {
	co.mu.Lock()
	if co.closed || co.lanes[l.addr] != l || (l.busy == 0 && !l.stalled) {
		l.watching = false // closed, dropped (keepOnly), or idle and well
		co.mu.Unlock()
		return
	}
	quiet := time.Since(l.busySince)
	if l.backAt.After(l.busySince) {
		quiet = time.Since(l.backAt)
	}
	var out []*waiter
	if quiet >= stallAfter && !l.stalled {
		co.setStalled(l, true)
		out, l.queue = l.queue, nil
	}
	stalled := l.stalled
	next := stallAfter
	if !stalled {
		next = stallAfter - quiet
	}
	probe := stalled && !l.probing && co.probe != nil
	l.probing = l.probing || probe
	l.watch.Reset(next)
	co.mu.Unlock()
	for _, w := range out {
		w.err = errStalled
		close(w.done)
	}
	if probe {
		go co.probeLane(l)
	}
	if stalled && co.onStall != nil {
		co.onStall()
	}
}

// probeLane asks a stalled lane's node whether it answers at all, within
// stallAfter; if it does, the lane takes checks again.
func (co *coalescer) probeLane(l *lane) {
	ctx, cancel := context.WithTimeout(context.Background(), stallAfter)
	err := co.probe(ctx, l.addr)
	cancel()
	co.mu.Lock()
	defer co.mu.Unlock()
	l.probing = false
	if err == nil {
		l.backAt = time.Now()
		co.setStalled(l, false)
	}
}

// heard reports whether a call that ended with err, made under ctx, ended
// with word from its node rather than by ctx's own end.
func heard(ctx context.Context, err error) bool { return err == nil || ctx.Err() == nil }

// close stops every lane's watch for good (Client.Close): a stalled
// lane's would look, and probe, forever.
func (co *coalescer) close() {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.closed = true
	for _, l := range co.lanes {
		if l.watch != nil {
			l.watch.Stop()
		}
		l.watching = false
	}
}

// setStalled marks l stalled or not, and publishes the stalled set when
// that changes; the caller holds co.mu.
func (co *coalescer) setStalled(l *lane, stalled bool) {
	if l.stalled == stalled {
		return
	}
	l.stalled = stalled
	var set map[string]bool
	for addr, x := range co.lanes {
		if x.stalled {
			if set == nil {
				set = map[string]bool{}
			}
			set[addr] = true
		}
	}
	if set == nil {
		co.stalled.Store(nil)
		return
	}
	co.stalled.Store(&set)
}

// isStalled reports whether the lane of addr is stalled, without the lock:
// the client routes no check to it meanwhile.
func (co *coalescer) isStalled(addr string) bool {
	set := co.stalled.Load()
	return set != nil && (*set)[addr]
}

// stalledAddrs returns the addresses of the stalled lanes (nil: none).
func (co *coalescer) stalledAddrs() map[string]bool {
	if set := co.stalled.Load(); set != nil {
		return *set
	}
	return nil
}
