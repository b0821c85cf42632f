package fault

import (
	"context"
	"time"
)

// skewAhead is how far ahead the clock of clockSkew's restarted node is:
// four times --max-clock-offset's default.
const skewAhead = "2s"

// clockSkew kills the hot shard's leader and starts it again from a test
// build whose clock is skewAhead ahead (wallclock, -tags clockskew), as if
// its clock had jumped while it was down: under strict load it must stop
// itself (exit 1, naming --max-clock-offset) without being handed its
// group back, and started once more with its clock in step it must rejoin
// intact, no count lost or doubled.
func clockSkew(ctx context.Context, e *env) error {
	if err := pause(ctx, warmup); err != nil {
		return err
	}
	l, err := e.n.Leader(ctx)
	if err != nil {
		return err
	}
	logOff := len(l.Log())
	l.Kill()
	f := e.h.Inject("kill -9, restarted "+skewAhead+" ahead", l.ID, true)
	l.Use(skewed)
	l.Env = []string{"FLOODGATE_TEST_CLOCK_SKEW=" + skewAhead}
	started := time.Now()
	if err := l.Start(); err != nil {
		return err
	}
	select {
	case <-l.Exited():
		e.t.Logf("%s, its clock %s ahead, stopped %v after its start", l.ID, skewAhead, time.Since(started).Round(100*time.Millisecond))
	case <-time.After(30 * time.Second):
		e.violate("%s ran 30 s with its clock %s ahead:\n%s", l.ID, skewAhead, tailLines(l.Log()[logOff:], 15))
	case <-ctx.Done():
		return ctx.Err()
	}
	log := l.Log()[logOff:]
	if exitedNow(l) && (l.ExitCode() != 1 || !mentions(log, "--max-clock-offset")) {
		e.violate("%s exited (code %d) without naming its clock:\n%s", l.ID, l.ExitCode(), tailLines(log, 15))
	}
	if mentions(log, "panic:") {
		e.violate("%s panicked:\n%s", l.ID, tailLines(log, 30))
	}
	l.Stop() // reaps the exited process (or stops one that did not exit)
	l.Use(bin)
	l.Env = nil
	if err := l.Start(); err != nil {
		return err
	}
	e.h.Heal(f)
	if err := l.WaitServing(ctx); err != nil {
		e.violate("%s did not come back with its clock in step: %v", l.ID, err)
		return nil
	}
	return e.n.Settle(ctx, 40*time.Second)
}
