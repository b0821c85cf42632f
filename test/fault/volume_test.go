package fault

import (
	"context"
	"os"
	"time"

	"github.com/floodgate/floodgate/test/e2e"
)

// lostVolume kills the hot group's leader with kill -9 and deletes its
// data dir, as when a pod's volume is lost. Started again under its id on
// an empty dir, it must be refused (exit 1, naming node.incarnation)
// without taking part: its votes and log went with the dir. Then the
// README's way back, under strict load: `floodgatectl leave ID` of the
// dead member, and the node started again on the same dir, which joins as
// a new member; no count lost or doubled.
func lostVolume(ctx context.Context, e *env) error {
	l, err := e.warmLeader(ctx)
	if err != nil {
		return err
	}
	var others []*e2e.Node
	for _, n := range e.c.Nodes {
		if n != l {
			others = append(others, n)
		}
	}
	l.Kill()
	f := e.h.Inject("kill -9, data dir lost", l.ID, true)
	if err := os.RemoveAll(l.Dir); err != nil {
		return err
	}
	logOff := len(l.Log())
	if err := l.Start(addrs(others)...); err != nil {
		return err
	}
	select {
	case <-l.Exited():
		log := l.Log()[logOff:]
		if l.ExitCode() != 1 || !mentions(log, "node.incarnation") {
			e.violate("%s, its data dir lost, exited (code %d) without naming node.incarnation:\n%s", l.ID, l.ExitCode(), tailLines(log, 15))
		}
	case <-time.After(30 * time.Second):
		e.violate("%s, its data dir lost, ran 30 s under its old id:\n%s", l.ID, tailLines(l.Log()[logOff:], 15))
	case <-ctx.Done():
		return ctx.Err()
	}
	l.Stop() // reaps the exited process (or stops one that did not exit)
	if _, err := e.c.Ctl(ctx, others[0].GRPC, "leave", l.ID); err != nil {
		return err
	}
	if err := l.Start(addrs(others)...); err != nil {
		return err
	}
	if err := l.WaitServing(ctx); err != nil {
		e.violate("%s did not join again after its leave: %v", l.ID, err)
		return nil
	}
	e.h.Heal(f)
	return e.n.Settle(ctx, 60*time.Second)
}
