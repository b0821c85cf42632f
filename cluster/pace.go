package cluster

import (
	"math/rand/v2"
	"time"

	"github.com/floodgate/floodgate/metrics"

	"github.com/hashicorp/raft"
)

// leaderPace is how much longer than its followers' heartbeat timeout a
// leader takes as its own. hashicorp/raft uses one timeout for two jobs: a
// follower starts an election when it has heard nothing for one timeout,
// and a leader heartbeats every 1/10 to 1/5 of it. Ten or more heartbeats
// per timeout are far more than detection needs, and on an idle cluster
// they are nearly all the work. With the leader's copy three times
// longer it still heartbeats every 0.3 to 0.6 of the followers' timeout,
// so followers detect a dead leader as fast, at a third of the messages
// and wakeups.
//
// The leader lease bounds it too: a leader that has not heard from a
// quorum for one lease steps down, so it must hear from them well within
// it (every 0.6 of the lease at most).
const leaderPace = 3

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

// pacer switches a group's reloadable Raft timing between its leader and
// follower values as the group's state changes, and, on a follower, watches
// the leader's silence so that a dead leader is replaced within 1.25
// heartbeat timeouts (watchJitter); it also counts the group's leader
// changes for the metrics (kind is "meta" or "shard").
type pacer struct {
	r        *raft.Raft
	kind     string
	follower raft.ReloadableConfig
	leader   raft.ReloadableConfig
	ch       chan raft.Observation
	obs      *raft.Observer
	stop     chan struct{}
	done     chan struct{}
}

// paceOf returns the leader's timing for follower timing rc and lease.
func paceOf(rc raft.ReloadableConfig, lease time.Duration) raft.ReloadableConfig {
	l := rc
	l.HeartbeatTimeout = max(rc.HeartbeatTimeout, leaderPace*min(rc.HeartbeatTimeout, lease))
	// raft insists on election >= heartbeat; a leader runs no election
	// (it waits this long only for a leadership transfer that failed).
	l.ElectionTimeout = max(rc.ElectionTimeout, l.HeartbeatTimeout)
	return l
}

// startPacer watches r's state. rc is the configuration r started with,
// its follower timing; lease is its leader lease timeout.
func startPacer(r *raft.Raft, kind string, rc raft.ReloadableConfig, lease time.Duration) *pacer {
	p := &pacer{
		r: r, kind: kind, follower: rc, leader: paceOf(rc, lease),
		ch: make(chan raft.Observation, 8), stop: make(chan struct{}), done: make(chan struct{}),
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
	slack := watchSlack(hb)
	watch := time.NewTimer(hb)
	defer watch.Stop()
	for {
		select {
		case <-p.stop:
			return
		case o := <-p.ch:
			if _, ok := o.Data.(raft.LeaderObservation); ok {
				metrics.LeaderChanges.WithLabelValues(p.kind).Inc()
			}
			// Observations may be dropped when the channel is full; the
			// state read now is the newest, which is all that matters.
			p.apply(&leading)
		case <-watch.C:
			p.apply(&leading)
			next := hb
			if !leading && p.r.State() == raft.Follower {
				if last := p.r.LastContact(); !last.IsZero() {
					if due := time.Until(last.Add(hb + slack)); due > 0 {
						next = due
					} else {
						p.poke()
						slack = watchSlack(hb)
					}
				}
			}
			watch.Reset(next)
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
func (p *pacer) poke() {
	up := p.follower
	up.HeartbeatTimeout += time.Microsecond
	up.ElectionTimeout = max(up.ElectionTimeout, up.HeartbeatTimeout)
	if p.r.ReloadConfig(up) == nil {
		_ = p.r.ReloadConfig(p.follower)
	}
}

func (p *pacer) apply(leading *bool) {
	now := p.r.State() == raft.Leader
	if now == *leading {
		return
	}
	rc := p.follower
	if now {
		rc = p.leader
	}
	// Going back to follower, the shorter timeout also resets the
	// follower's timer at once (raft notifies it).
	if p.r.ReloadConfig(rc) == nil {
		*leading = now
	}
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
