package cluster

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/floodgate/floodgate/metrics"

	"github.com/hashicorp/raft"
)

// leaderTimeouts is how many grid periods a leader's Raft heartbeat timeout
// spans. hashicorp/raft uses one timeout for two jobs: a follower starts an
// election when it has heard nothing for one timeout, and a leader
// heartbeats each follower a tenth to a fifth of one after the last
// heartbeat, on a timer of its own. On the grid (grid.go) the pacer makes
// the leader heartbeat every follower at each instant instead; with a
// timeout of ten periods raft's own timer never fires first (a tenth of
// it is one period), and if the instants ever stopped coming it would
// still heartbeat within two periods, 0.8 of the lease.
const leaderTimeouts = 10

// watchJitter is the most a follower waits past its heartbeat timeout
// before it calls an election, as a share of the timeout (1/4). A
// follower's own Raft timer fires at random between one and two timeouts
// and, when the leader was heard from less than a timeout before, draws
// again: it notices a dead leader from one to three timeouts after the
// last contact, and an election succeeds only once a second replica has
// noticed too (a voter that still has a leader refuses). The watch pokes
// the timer when the silence reaches a timeout plus a random slice of a
// quarter of one: every follower notices within 1.25 timeouts, and the
// random slice keeps two of them from splitting the vote.
const watchJitter = 4

// pacer runs a group's side of the node's heartbeat grid, and switches the
// group's reloadable Raft timing between its leader and follower values as
// its state changes. On each instant of the grid, a leader heartbeats
// every follower (raft.VerifyLeader sends them at once), and a follower
// checks it heard its leader's heartbeat of the instant before. When it
// did not, the pacer watches the silence so that a dead leader is replaced
// within 1.25 heartbeat timeouts (watchJitter). It also counts the group's
// leader changes for the metrics (kind is "meta" or "shard"): on the
// replica that became leader only, so that the cluster's sum counts each
// change once (every replica observes it, and a rolling restart of three
// pods summed dozens).
type pacer struct {
	r        *raft.Raft
	self     raft.ServerID
	kind     string
	follower raft.ReloadableConfig
	leader   raft.ReloadableConfig
	grid     *grid
	onLeader func() // may be nil
	ch       chan raft.Observation
	obs      *raft.Observer
	stop     chan struct{}
	done     chan struct{}

	mu      sync.Mutex
	handing int                   // hand-offs under way (handOff)
	current raft.ReloadableConfig // the timing r runs
}

// paceOf returns the timing of a leader on a grid of period every, for
// follower timing rc: a heartbeat timeout of leaderTimeouts periods, so
// that the grid, not raft's timer, spaces the heartbeats.
func paceOf(rc raft.ReloadableConfig, every time.Duration) raft.ReloadableConfig {
	l := rc
	l.HeartbeatTimeout = max(rc.HeartbeatTimeout, leaderTimeouts*every)
	// raft insists on election >= heartbeat; a leader runs no election
	// (it waits this long only for a leadership transfer that failed).
	l.ElectionTimeout = max(rc.ElectionTimeout, l.HeartbeatTimeout)
	return l
}

// startPacer runs r's side of grid g. rc is the configuration r started
// with, its follower timing; onLeader, when not nil, is called on every
// change of leader. self is r's server id.
func startPacer(r *raft.Raft, self raft.ServerID, kind string, rc raft.ReloadableConfig, g *grid, onLeader func()) *pacer {
	p := &pacer{
		r: r, self: self, kind: kind, follower: rc, leader: paceOf(rc, g.every), grid: g, onLeader: onLeader,
		ch: make(chan raft.Observation, 8), stop: make(chan struct{}), done: make(chan struct{}), current: rc,
	}
	p.obs = raft.NewObserver(p.ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.RaftState, raft.LeaderObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(p.obs)
	go p.loop()
	return p
}

func (p *pacer) loop() {
	defer close(p.done)
	leading := false
	p.apply(&leading)
	hb := p.follower.HeartbeatTimeout
	suspect := p.grid.suspect()
	slack := watchSlack(hb)
	watch := time.NewTimer(hb)
	watch.Stop()
	watching := false // the watch runs only while the leader seems silent
	for {
		select {
		case <-p.stop:
			watch.Stop()
			return
		case o := <-p.ch:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				if lo.LeaderID == p.self {
					metrics.LeaderChanges.WithLabelValues(p.kind).Inc()
				}
				if p.onLeader != nil {
					p.onLeader()
				}
			}
			// Observations may be dropped when the channel is full; the
			// state read now is the newest, which is all that matters.
			p.apply(&leading)
		case <-p.grid.tick():
			p.apply(&leading)
			if leading {
				p.r.VerifyLeader() // heartbeats every follower now; the answer does not matter
				continue
			}
			if last := p.r.LastContact(); !watching && p.r.State() == raft.Follower && !last.IsZero() && time.Since(last) > suspect {
				watching = true
				watch.Reset(max(time.Until(last.Add(hb+slack)), 0))
			}
		case <-watch.C:
			watching = false
			last := p.r.LastContact()
			if leading || p.r.State() != raft.Follower || last.IsZero() {
				continue // an election runs on raft's own timers
			}
			if due := time.Until(last.Add(hb + slack)); due > 0 {
				if time.Since(last) > suspect { // still silent: not yet due
					watching = true
					watch.Reset(due)
				}
				continue
			}
			p.poke()
			slack = watchSlack(hb)
			watching = true
			watch.Reset(hb) // raft elects, or the leader is back by then
		}
	}
}

// watchSlack draws how far past its timeout a follower lets the silence
// go before it calls an election: up to a quarter of the timeout.
func watchSlack(hb time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(hb/watchJitter) + 1))
}

// poke makes a follower's Raft check its leader's silence now: raft looks
// again at once when its heartbeat timeout shrinks, so the timeout is
// raised a microsecond and put back. Raft itself then decides: it calls an
// election only if it has heard nothing for a whole timeout.
//
// Both reloads are made under p.mu: a retain between them would have
// been undone by the second, raft left on the old counts while the pacer
// believed it ran the new.
func (p *pacer) poke() {
	p.mu.Lock()
	defer p.mu.Unlock()
	up := p.follower
	up.HeartbeatTimeout += time.Microsecond
	up.ElectionTimeout = max(up.ElectionTimeout, up.HeartbeatTimeout)
	if p.r.ReloadConfig(up) == nil {
		_ = p.r.ReloadConfig(p.follower)
	}
}

// retain sets the group's log retention (raft's TrailingLogs and
// SnapshotThreshold, retention.go) in both its timings, and runs it at
// once. Safe to call on a nil pacer (it does nothing).
func (p *pacer) retain(trailing, threshold uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.follower.TrailingLogs == trailing && p.follower.SnapshotThreshold == threshold {
		return
	}
	p.follower.TrailingLogs, p.follower.SnapshotThreshold = trailing, threshold
	p.leader.TrailingLogs, p.leader.SnapshotThreshold = trailing, threshold
	rc := p.current
	rc.TrailingLogs, rc.SnapshotThreshold = trailing, threshold
	if p.r.ReloadConfig(rc) == nil {
		p.current = rc
	}
}

func (p *pacer) apply(leading *bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.r.State() == raft.Leader
	rc := p.follower
	if now && p.handing == 0 {
		rc = p.leader
	}
	// Going back to follower, the shorter timeout also resets the
	// follower's timer at once (raft notifies it).
	if rc == p.current {
		*leading = now
		return
	}
	if p.r.ReloadConfig(rc) == nil {
		p.current, *leading = rc, now
	}
}

// handOff runs transfer, a leadership transfer of the group, on the
// follower timing, and puts the leader's back if the group still leads
// after it. hashicorp/raft bounds a transfer by the election timeout and
// refuses every write until it ends: on the leader's timing (paceOf, 2s
// with the default flags) a transfer to a replica it could not reach
// stalled the group that long, each time the reconciler tried to hand a
// shard to its preferred leader behind a flapping link. Safe to call on
// a nil pacer (it only runs transfer).
func (p *pacer) handOff(transfer func() error) error {
	if p == nil {
		return transfer()
	}
	var leading bool
	p.mu.Lock()
	p.handing++
	p.mu.Unlock()
	p.apply(&leading)
	defer func() {
		p.mu.Lock()
		p.handing--
		p.mu.Unlock()
		p.apply(&leading)
	}()
	return transfer()
}

// close stops watching. Safe to call on a nil pacer.
func (p *pacer) close() {
	if p == nil {
		return
	}
	p.r.DeregisterObserver(p.obs)
	close(p.stop)
	<-p.done
}

// followerTiming is the reloadable part of rc.
func followerTiming(rc *raft.Config) raft.ReloadableConfig {
	return raft.ReloadableConfig{
		TrailingLogs: rc.TrailingLogs, SnapshotInterval: rc.SnapshotInterval, SnapshotThreshold: rc.SnapshotThreshold,
		HeartbeatTimeout: rc.HeartbeatTimeout, ElectionTimeout: rc.ElectionTimeout,
	}
}
