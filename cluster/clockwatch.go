package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/floodgate/floodgate/cluster/clockcheck"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/wallclock"
)

const (
	// clockEvery is how often a node reads the other nodes' clocks.
	clockEvery = 5 * time.Second
	// clockRecheck is how soon a reading follows one that found this
	// node's clock off, and how often a starting node reads until a peer
	// answers: a leader with a clock ahead admits over the limit while it
	// leads, so the verdict must not wait for three full rounds.
	clockRecheck = time.Second
	// clockStartPace is how long a starting node reads every clockRecheck
	// while no peer answers: a single node, or peers of an older release
	// that tell no time, then go at clockEvery.
	clockStartPace = 30 * time.Second
	// clockStrikes is how many readings in a row must find this node's
	// clock the outlier before it stops: one slow round is not a verdict.
	clockStrikes = 3
	// clockCallTimeout bounds one reading; a peer that does not answer
	// counts neither way.
	clockCallTimeout = time.Second
)

// clockState is what the clock watch found.
type clockState struct {
	failed chan struct{} // closed when this node's clock is judged off (by run, once: it returns then)
	mu     sync.Mutex
	err    error
	median time.Duration // the peers' median offset from this node's clock
	read   bool          // median comes from at least one reading
	// heldSaid and heldSaidAt are the held step (wallclock.Guard) last
	// warned of, and when (0: none held): said again when it changes, or
	// every clockEvery.
	heldSaid   time.Duration
	heldSaidAt time.Time
}

// ClockFailed is closed once this node found its clock beyond
// --max-clock-offset from a majority of the cluster's, several readings
// in a row: a group leader stamps every check with its clock, so it must not
// lead with it, and the process should stop; ClockErr says why.
func (n *Node) ClockFailed() <-chan struct{} { return n.clock.failed }

// ClockErr is why ClockFailed closed (nil before).
func (n *Node) ClockErr() error {
	n.clock.mu.Lock()
	defer n.clock.mu.Unlock()
	return n.clock.err
}

// ClockOffset is the median offset of the other nodes' clocks from this
// node's at the last reading (positive: theirs are ahead); ok is false
// when there is none (the check is off, or no node answered).
func (n *Node) ClockOffset() (offset time.Duration, ok bool) {
	n.clock.mu.Lock()
	defer n.clock.mu.Unlock()
	return n.clock.median, n.clock.read
}

// watchClock reads the other members' clocks every clockEvery (every
// clockRecheck from its start until a peer answers, for clockStartPace at
// most, and after a reading that found its own clock off), and stops the node (ClockFailed) when its
// own is the outlier clockStrikes times in a row.
func (n *Node) watchClock() {
	defer n.wg.Done()
	if n.cfg.MaxClockOffset <= 0 {
		return
	}
	ctx, cancel := n.untilStop(context.Background())
	defer cancel()
	w := clockWatch{max: n.cfg.MaxClockOffset, members: n.otherMembers, read: n.peers.Clock, log: n.log, state: &n.clock, stamp: n.stamp, known: n.knowsCluster}
	w.run(ctx)
}

// knowsCluster reports whether this node is a member of a cluster it
// knows: before, its meta state may still be replaying or empty.
func (n *Node) knowsCluster() bool {
	n.mu.RLock()
	member := n.member
	n.mu.RUnlock()
	return member && n.View().Initialized()
}

// otherMembers lists the gRPC addresses of the other active members.
func (n *Node) otherMembers() []string {
	var out []string
	for _, m := range n.View().Nodes {
		if m.Id != n.cfg.NodeID && m.State == metav1.NodeState_NODE_STATE_ACTIVE && m.GrpcAddr != "" {
			out = append(out, m.GrpcAddr)
		}
	}
	return out
}

// clockWatch is the clock check's loop, apart from the node so that it
// runs on fake time in tests.
type clockWatch struct {
	max     time.Duration
	members func() []string
	read    func(ctx context.Context, addr string) (time.Time, error)
	log     *slog.Logger
	state   *clockState
	// stamp is the node's stamping clock, which follows a step of the
	// node's clock only once a reading finds the clock in step
	// (clockcheck.Verdict.InStep).
	stamp *wallclock.Guard
	// known reports whether the node knows its cluster (nil: it does):
	// until then members lists nobody, which is no agreement.
	known func() bool
}

func (w clockWatch) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	strikes, judged, start := 0, false, time.Now()
	var last, tieSaid time.Time // when the last round started; when a tie was last said
	for {
		wake := w.stamp.Wake()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
			// A stamp was held back (a step, or a resume from suspend):
			// read now, or clockRecheck after the last round if that is
			// later. A step held in a tie signals at every check, so the
			// wake is not listened to again before that round.
			if wait := clockRecheck - time.Since(last); wait > 0 {
				t.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}
		members := w.members()
		at := time.Now()
		last = at
		samples := w.readAll(ctx, members)
		end := time.Now()
		judged = judged || len(samples) > 0 || time.Since(start) >= clockStartPace
		if judged {
			t.Reset(clockEvery)
		} else {
			t.Reset(clockRecheck) // starting: the members or their answers are still to come
		}
		v := clockcheck.Judge(samples, len(members), w.max)
		w.follow(v, at, end)
		w.state.mu.Lock()
		w.state.median, w.state.read = v.Median, len(samples) > 0
		w.state.mu.Unlock()
		if !v.Outlier() {
			switch {
			case v.Disagree > 0 && time.Since(tieSaid) >= clockEvery:
				// A minority, or a tie: which clock is off cannot be told
				// here; said (every clockEvery, however often a held step
				// has the clock read), so that a two-node cluster apart is
				// heard.
				tieSaid = time.Now()
				w.log.Warn("some nodes' clocks are beyond --max-clock-offset from this node's", "nodes", v.Disagree,
					"of", len(members), "median_offset", v.Median, "max_clock_offset", w.max)
			case strikes > 0:
				w.log.Info("this node's clock agrees with the cluster's again", "median_offset", v.Median)
			}
			strikes = 0
			continue
		}
		strikes++
		t.Reset(clockRecheck)
		err := fmt.Errorf("%w: this node's clock is %s the clock of %d of the %d other nodes (their median offset %s; --max-clock-offset %s): "+
			"a group leader stamps each check with its clock, so with it windows would slide early (admitting over the limit) or late; "+
			"fix its time sync (NTP, chrony) and start it again", ErrClock, describeOffset(v.Median), v.Disagree, len(members), v.Median, w.max)
		if strikes < clockStrikes {
			w.log.Warn("clock check", "err", err, "strike", strikes, "of", clockStrikes)
			continue
		}
		w.state.mu.Lock()
		w.state.err = err
		w.state.mu.Unlock()
		close(w.state.failed)
		return
	}
}

// follow lets the node's stamps follow its clock as read between at and
// end, when the readings found it in step with the cluster's (and it did
// not step meanwhile: wallclock.Guard.Agreed), and says when they do not:
// a step of the clock (NTP, date) is followed only once a majority of the
// cluster has seen the new time, so that a leader whose clock jumped
// ahead never stamps a group's log with it in the seconds before its
// strikes are up (stamps never go back, so one such entry would hold the
// group's windows still for as long as the jump).
func (w clockWatch) follow(v clockcheck.Verdict, at, end time.Time) {
	// A node that knows no cluster yet (its meta state still replaying)
	// reads no peer, and alone would agree with itself: its stamps follow
	// its clock unanchored until it knows whom to ask.
	if v.InStep() && (w.known == nil || w.known()) {
		w.stamp.Agreed(at, end)
	}
	now := time.Now()
	held := w.stamp.Held(now)
	w.state.mu.Lock()
	was := w.state.heldSaid
	say := held != 0 && (was == 0 || (held-was).Abs() > w.max || now.Sub(w.state.heldSaidAt) >= clockEvery)
	if say || held == 0 {
		w.state.heldSaid, w.state.heldSaidAt = held, now
	}
	w.state.mu.Unlock()
	switch {
	case say:
		w.log.Warn("this node's clock stepped since the cluster last agreed with it: checks are stamped by its monotonic clock until a majority of the cluster reads the new time",
			"step", held, "max_clock_offset", w.max)
	case held == 0 && was != 0:
		w.log.Info("the cluster agrees with this node's clock again: checks are stamped with it", "step", was)
	}
}

// ClockHeld is how far this node's clock has stepped from the time its
// checks are stamped with: 0 while the stamps follow it.
func (n *Node) ClockHeld() time.Duration { return n.stamp.Held(time.Now()) }

// describeOffset says which way this node's clock is off, given the
// others' median offset from it.
func describeOffset(median time.Duration) string {
	if median > 0 {
		return fmt.Sprintf("%s behind", median)
	}
	return fmt.Sprintf("%s ahead of", -median)
}

// readAll reads the clock of each member at addrs once; a member that
// does not answer in time is left out.
func (w clockWatch) readAll(ctx context.Context, addrs []string) []clockcheck.Sample {
	var samples []clockcheck.Sample
	for _, addr := range addrs {
		cctx, cancel := context.WithTimeout(ctx, clockCallTimeout)
		sent := wallclock.Now()
		remote, err := w.read(cctx, addr)
		received := wallclock.Now()
		cancel()
		if err != nil {
			w.log.Debug("clock reading", "addr", addr, "err", err)
			continue
		}
		samples = append(samples, clockcheck.Sample{Sent: sent, Received: received, Remote: remote})
	}
	return samples
}

// clockInStep reads member m's clock and says whether it is within
// --max-clock-offset of this node's. A leader hands its group only to a
// node in step, since the new leader stamps checks with its clock: a node
// restarted with its clock off would otherwise lead until its own clock
// watch stops it. A node that tells no time (an older release) passes, as
// does any node while the check is off; one that does not answer fails.
func (n *Node) clockInStep(ctx context.Context, m *metav1.Node) bool {
	if n.cfg.MaxClockOffset <= 0 {
		return true
	}
	if m == nil || m.GrpcAddr == "" {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, clockCallTimeout)
	defer cancel()
	sent := wallclock.Now()
	remote, err := n.peers.Clock(cctx, m.GrpcAddr)
	received := wallclock.Now()
	if err != nil {
		return errors.Is(err, ErrNoClock)
	}
	s := clockcheck.Sample{Sent: sent, Received: received, Remote: remote}
	if clockcheck.Judge([]clockcheck.Sample{s}, 1, n.cfg.MaxClockOffset).Disagree > 0 {
		off, _ := s.Offset()
		n.log.Warn("leadership not handed over: the node's clock is beyond --max-clock-offset from this node's", "to", m.Id,
			"offset", off.Round(time.Millisecond), "max_clock_offset", n.cfg.MaxClockOffset)
		return false
	}
	return true
}
