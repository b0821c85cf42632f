package fault

import (
	"context"
	"fmt"
	"strings"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/e2e"
)

// The disk scenarios: a full disk, a hung one, a read-only one.

// diskFull fills the data dir of the hot shard's leader under load: it
// must stop itself (exit 1, naming the full disk), and come back without
// damage on its data dir once the disk has room, after a kill -9 so that
// its stores are checked and reopened. Its Raft log reserves room ahead
// of its writes (raftlog preallocates segments), so a full disk alone
// would go unseen for thousands of entries: checks of long keys through
// another node use that room up.
func diskFull(ctx context.Context, e *env) error {
	l, err := e.warmLeader(ctx)
	if err != nil {
		return err
	}
	logOff := len(l.Log())
	f := e.h.Inject("disk full", l.ID, false)
	if err := e.disk[l.ID].Fill(); err != nil {
		return err
	}
	fillers := fillLog(ctx, e, l)
	stopped := -1
	select {
	case <-l.Exited():
		// Its shard must answer again as after any leader's death.
		stopped = e.h.Inject("stopped on a full disk", l.ID, true)
		e.h.Require(stopped, diskFullFailover)
	case <-time.After(diskFullBound):
	}
	exited := exitedNow(l)
	fillers()
	if err := e.disk[l.ID].Free(); err != nil {
		return err
	}
	e.h.Heal(f)
	log := l.Log()[logOff:]
	e.t.Logf("%s on a full disk: exited %v (code %d), %d log lines say ENOSPC", l.ID, exited, l.ExitCode(),
		strings.Count(strings.ToLower(log), "no space left on device"))
	switch {
	case !exited:
		e.violate("%s still running %s after its disk filled under load", l.ID, diskFullBound)
	case l.ExitCode() != 1 || !mentions(log, "no space left on device"):
		e.violate("%s exited (code %d) on a full disk without saying so:\n%s", l.ID, l.ExitCode(), tailLines(log, 15))
	}
	g := e.h.Inject("kill -9", l.ID, false)
	l.Kill()
	if err := l.Start(); err != nil {
		return err
	}
	e.h.Heal(g)
	if stopped >= 0 {
		e.h.Heal(stopped)
	}
	if err := l.WaitServing(ctx); err != nil {
		e.violate("%s did not come back after its disk was full: %v", l.ID, err)
		return nil
	}
	return e.n.Settle(ctx, 40*time.Second)
}

// diskFullBound is how long a node whose disk is full may run on under
// the filler's load: its log's reserve is a few MiB.
const diskFullBound = 30 * time.Second

// diskFullFailover is how soon the shard of a leader that stopped on a
// full disk must answer again: an election, as after a kill (about
// 0.6 s), with disk-stall's margin.
const diskFullFailover = 4500 * time.Millisecond

// fillLog sends strict checks of long keys (none of the scenario's) to a
// node other than full, two callers at a time, until the returned stop is
// called: each batch adds about 200 KB to every replica's Raft log.
func fillLog(ctx context.Context, e *env, full *e2e.Node) (stop func()) {
	var via *e2e.Node
	for _, n := range e.c.Nodes {
		if n != full && via == nil {
			via = n
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	pad := strings.Repeat("f", 900)
	lim := &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 1_000_000, WindowMs: 60_000}
	for w := range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; ctx.Err() == nil; i++ {
				req := &pb.AllowBatchRequest{}
				for j := range 200 {
					req.Requests = append(req.Requests, &pb.AllowRequest{Key: fmt.Sprintf("filler-%d-%d-%d-%s", w, i, j, pad), Limit: lim})
				}
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				_, _ = via.Limiter().AllowBatch(cctx, req) // answered or not: only the bytes matter
				ccancel()
			}
		}()
	}
	return func() {
		cancel()
		<-done
		<-done
	}
}

// stallBound is the disk-stall scenario's --max-sync-duration.
const stallBound = 2 * time.Second

// diskStall hangs every fsync of the hot shard's leader (its disk answers
// nothing, as a network volume that lost its path): it must stop itself
// within --max-sync-duration and a quarter (exit 1, naming the flag), and
// its shard must answer again from the other replicas while the disk
// still hangs, for up to 8 s. Once the disk answers again the node starts
// on its data dir and must rejoin intact.
func diskStall(ctx context.Context, e *env) error {
	l, err := e.warmLeader(ctx)
	if err != nil {
		return err
	}
	logOff := len(l.Log())
	f := e.h.Inject("disk stall", l.ID, true)
	// The stop (at most 2.5 s), then an election (about 0.6 s).
	within := stallBound*5/4 + 2*time.Second
	e.h.Require(f, within)
	e.stall[l.ID].Hold()
	held := time.Now()
	select {
	case <-l.Exited():
	case <-time.After(8 * time.Second):
	}
	took, exited := time.Since(held), exitedNow(l)
	e.stall[l.ID].Release()
	e.h.Heal(f)
	log := l.Log()[logOff:]
	switch {
	case !exited:
		e.violate("%s still ran %s after its disk hung, with --max-sync-duration %s:\n%s", l.ID, took.Round(time.Millisecond), stallBound, tailLines(log, 10))
	case l.ExitCode() != 1 || !mentions(log, "--max-sync-duration"):
		e.violate("%s exited (code %d) on a hung disk without naming --max-sync-duration:\n%s", l.ID, l.ExitCode(), tailLines(log, 10))
	default:
		e.t.Logf("%s stopped %s after its disk hung: %s", l.ID, took.Round(time.Millisecond), tailLines(log, 1))
	}
	l.Kill() // reaps it (or stops it, if it ran on)
	// Its shard must answer from the other replicas: started again at
	// once, the node stood in their election while it opened (a
	// candidate that won and could not serve for seconds).
	if err := pause(ctx, time.Until(held.Add(within))); err != nil {
		return err
	}
	if err := l.Start(); err != nil {
		return err
	}
	if err := l.WaitServing(ctx); err != nil {
		e.violate("%s did not come back after its disk hung: %v", l.ID, err)
		return nil
	}
	return e.n.Settle(ctx, 40*time.Second)
}

// readOnlyStart stops the hot shard's leader cleanly and starts it on a
// read-only data dir: it must exit saying so, or stay up without
// answering wrongly (the checkers judge its answers). Then it starts again
// on a writable dir and must rejoin intact.
func readOnlyStart(ctx context.Context, e *env) error {
	l, err := e.warmLeader(ctx)
	if err != nil {
		return err
	}
	f := e.h.Inject("read-only restart", l.ID, false)
	l.Stop()
	if err := e.disk[l.ID].ReadOnly(true); err != nil {
		return err
	}
	logOff := len(l.Log())
	if err := l.Start(); err != nil {
		return err
	}
	select { // a clear failure is an exit at start
	case <-l.Exited():
	case <-time.After(8 * time.Second):
	}
	if exitedNow(l) {
		code, log := l.ExitCode(), l.Log()[logOff:]
		if code == 0 || !mentions(log, "read-only") {
			e.violate("%s exited (code %d) on a read-only data dir without saying so:\n%s", l.ID, code, tailLines(log, 15))
		}
		e.t.Logf("%s on a read-only data dir exited with code %d: %s", l.ID, code, tailLines(log, 1))
	} else {
		e.t.Logf("%s stayed up on a read-only data dir", l.ID)
	}
	l.Kill()
	if err := e.disk[l.ID].ReadOnly(false); err != nil {
		return err
	}
	if err := l.Start(); err != nil {
		return err
	}
	e.h.Heal(f)
	if err := l.WaitServing(ctx); err != nil {
		e.violate("%s did not come back on a writable data dir: %v", l.ID, err)
		return nil
	}
	return e.n.Settle(ctx, 40*time.Second)
}
