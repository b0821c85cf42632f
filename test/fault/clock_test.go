package fault

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/test/e2e"
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
	l, err := e.warmLeader(ctx)
	if err != nil {
		return err
	}
	logOff := len(l.Log())
	l.Kill()
	f := e.h.Inject("kill -9, restarted "+skewAhead+" ahead", l.ID, true)
	// Back once its group has a new leader: it returns as a follower, and
	// only a hand-over (which its clock must forbid) would make it lead.
	if _, err := e.n.Leader(ctx); err != nil {
		return err
	}
	l.Use(skewed)
	l.Env = []string{"FLOODGATE_TEST_CLOCK_SKEW=" + skewAhead}
	started := time.Now()
	if err := l.Start(); err != nil {
		return err
	}
	// Until it stops, it must lead nothing: its own gauge says (leaders
	// hand it no group, and no election is due).
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	deadline := time.After(30 * time.Second)
	led := false
wait:
	for {
		select {
		case <-l.Exited():
			e.t.Logf("%s, its clock %s ahead, stopped %v after its start", l.ID, skewAhead, time.Since(started).Round(100*time.Millisecond))
			break wait
		case <-deadline:
			e.violate("%s ran 30 s with its clock %s ahead:\n%s", l.ID, skewAhead, tailLines(l.Log()[logOff:], 15))
			break wait
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
			n, err := groupsLed(ctx, l)
			if errors.Is(err, errNoGauge) {
				e.violate("%s: %v", l.ID, err) // a renamed gauge must not pass for "leads nothing"
				break wait
			}
			led = led || n > 0
		}
	}
	if led {
		e.violate("%s led a group with its clock %s ahead", l.ID, skewAhead)
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

// errNoGauge: the node answered /metrics without floodgate_groups_led.
var errNoGauge = errors.New("/metrics has no floodgate_groups_led")

// groupsLed is n's floodgate_groups_led gauge. A node that does not
// answer (starting, or stopped: it exits once it sees its clock) is an
// error; one whose metrics lack the gauge is errNoGauge.
func groupsLed(ctx context.Context, n *e2e.Node) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.HTTP+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "floodgate_groups_led "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errNoGauge
}
