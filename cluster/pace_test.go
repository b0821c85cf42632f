package cluster

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// testEvery is the grid period of the memGroup's timing (heartbeat timeout
// 100ms, lease 50ms).
var testEvery = gridEvery(100*time.Millisecond, 50*time.Millisecond)

// pacedGroup is a memGroup whose replicas pace their heartbeats.
func pacedGroup(t *testing.T) (*memGroup, []*pacer) {
	g := newMemGroup(t, 3)
	var ps []*pacer
	testGrid := newGrid(testEvery) // a grid's channels belong to one bubble
	for i, r := range g.rafts {
		rc := r.ReloadableConfig()
		ps = append(ps, startPacer(r, raft.ServerID(fmt.Sprintf("r%d", i)), "shard", rc, testGrid, nil))
	}
	time.Sleep(50 * time.Millisecond)
	synctest.Wait()
	return g, ps
}

func closePaced(g *memGroup, ps []*pacer) {
	for _, p := range ps {
		p.close()
	}
	g.close()
}

// moveLeader hands g's leadership to another replica, and waits (on fake
// time) until it has moved.
func moveLeader(t *testing.T, g *memGroup) {
	t.Helper()
	old := g.leader()
	if err := g.rafts[old].LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	synctest.Wait()
	if g.leader() == old {
		t.Fatal("leadership did not move")
	}
}

// wantTiming checks every replica runs the timing of its role.
func wantTiming(t *testing.T, g *memGroup) {
	t.Helper()
	for i, r := range g.rafts {
		hb := r.ReloadableConfig().HeartbeatTimeout
		want := 100 * time.Millisecond
		if r.State() == raft.Leader {
			want = leaderTimeouts * testEvery
		}
		if hb != want {
			t.Fatalf("replica %d (%s): heartbeat timeout %s, want %s", i, r.State(), hb, want)
		}
	}
}

func TestPacerGivesTheLeaderItsOwnTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		wantTiming(t, g)
		for range 3 { // leadership moves: the timing follows it
			moveLeader(t, g)
			wantTiming(t, g)
		}
	})
}

func TestPacedLeaderCausesNoElections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		l := g.leader()
		term := g.rafts[l].CurrentTerm()
		time.Sleep(time.Minute) // 600 follower timeouts
		if g.leader() != l || g.rafts[l].CurrentTerm() != term {
			t.Fatalf("leader %d term %d became %d term %d with nothing wrong", l, term, g.leader(), g.rafts[l].CurrentTerm())
		}
	})
}

func TestPacedFollowersDetectADeadLeaderAsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		l := g.leader()
		g.trans[l].DisconnectAll()
		for i, tr := range g.trans {
			if i != l {
				tr.Disconnect(g.trans[l].LocalAddr())
			}
		}
		start := time.Now()
		// A follower notices when a timer drawn from one to two of its own
		// timeouts (100ms) fires at least a timeout after the last contact:
		// within 300ms of the cut, whatever the draws. A follower paced like
		// the leader (300ms) could not notice before 240ms, and mostly
		// would notice much later. Elections that follow can split and take
		// rounds of their own, so the bound is on noticing, not on winning.
		noticed := func() bool {
			for i, r := range g.rafts {
				if st := r.State(); i != l && (st == raft.Candidate || st == raft.Leader) {
					return true
				}
			}
			return false
		}
		for !noticed() {
			time.Sleep(time.Millisecond)
		}
		if took := time.Since(start); took > 301*time.Millisecond {
			t.Fatalf("a follower noticed the dead leader after %s, want within 300ms (three of its timeouts)", took)
		}
		for {
			n := -1
			for i, r := range g.rafts {
				if i != l && r.State() == raft.Leader {
					n = i
				}
			}
			if n >= 0 {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatal("no new leader within 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		wantTiming(t, g)
	})
}

func TestPaceOf(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ hb, election, every, wantHB, wantElection time.Duration }{
		{500 * ms, 500 * ms, 200 * ms, 2000 * ms, 2000 * ms},
		{500 * ms, 3000 * ms, 200 * ms, 2000 * ms, 3000 * ms}, // a longer election stays
		{5000 * ms, 500 * ms, 200 * ms, 5000 * ms, 5000 * ms}, // never below the followers'
	} {
		rc := raft.ReloadableConfig{HeartbeatTimeout: c.hb, ElectionTimeout: c.election, TrailingLogs: 7}
		got := paceOf(rc, c.every)
		if got.HeartbeatTimeout != c.wantHB || got.ElectionTimeout != c.wantElection || got.TrailingLogs != 7 {
			t.Errorf("paceOf(hb %s, election %s, every %s) = %+v", c.hb, c.election, c.every, got)
		}
	}
}

// The grid's period lets a follower learn of a missed heartbeat before
// its timeout ends, and raft's own leader timer, which the grid's
// heartbeats keep resetting, neither fires before the next instant nor,
// were the instants to stop, leaves a gap that ends the lease.
func TestGridEvery(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ hb, lease, want time.Duration }{
		{500 * ms, 500 * ms, 200 * ms}, // the defaults
		{1000 * ms, 500 * ms, 200 * ms},
		{500 * ms, 250 * ms, 100 * ms},
		{5 * ms, 5 * ms, 2 * ms}, // raft's least timeouts
		{10 * time.Second, 10 * time.Second, 4 * time.Second},
	} {
		every := gridEvery(c.hb, c.lease)
		if every != c.want {
			t.Errorf("gridEvery(hb %s, lease %s) = %s, want %s", c.hb, c.lease, every, c.want)
		}
		if 2*every > c.hb {
			t.Errorf("hb %s: a missed heartbeat is noticed %s after the last, past the timeout", c.hb, 2*every)
		}
		lead := paceOf(raft.ReloadableConfig{HeartbeatTimeout: c.hb, ElectionTimeout: c.hb}, every)
		if first := lead.HeartbeatTimeout / 10; first < every {
			t.Errorf("hb %s lease %s: raft's leader timer may fire %s after a heartbeat, before the next instant (%s)", c.hb, c.lease, first, every)
		}
		if last := lead.HeartbeatTimeout / 5; last > 8*c.lease/10 && lead.HeartbeatTimeout == leaderTimeouts*every {
			t.Errorf("hb %s lease %s: without the grid raft's timer leaves gaps up to %s, past 0.8 of the lease", c.hb, c.lease, last)
		}
	}
}

// cut isolates replica i from the others, both ways.
func (g *memGroup) cut(i int) {
	g.trans[i].DisconnectAll()
	for j, tr := range g.trans {
		if j != i {
			tr.Disconnect(g.trans[i].LocalAddr())
		}
	}
}

// heal reconnects replica i to the others.
func (g *memGroup) heal(i int) {
	for j, tr := range g.trans {
		if j != i {
			tr.Connect(g.trans[i].LocalAddr(), g.trans[i])
			g.trans[i].Connect(tr.LocalAddr(), tr)
		}
	}
}

// With the watch, the followers of a dead leader elect a new one within
// 1.25 of their heartbeat timeout after they last heard from it, every
// time: raft's own timer alone can take three timeouts, and more when the
// first follower to notice asks the other before it has noticed too.
func TestWatchedFollowersReplaceADeadLeaderWithinATimeoutAndAQuarter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		const hb = 100 * time.Millisecond
		// The leader's last heartbeat came at most one grid period (20ms)
		// before the cut.
		bound := hb + hb/watchJitter + testEvery + 2*time.Millisecond
		var worst time.Duration
		for round := range 20 {
			old := g.leader()
			g.cut(old)
			start := time.Now()
			for {
				if n := g.leader(); n >= 0 && n != old {
					break
				}
				if time.Since(start) > 10*time.Second {
					t.Fatalf("round %d: no new leader within 10s", round)
				}
				time.Sleep(time.Millisecond)
			}
			worst = max(worst, time.Since(start))
			g.heal(old)
			time.Sleep(time.Second) // the old leader steps down and catches up
			synctest.Wait()
		}
		if worst > bound {
			t.Fatalf("a new leader took %s, want within %s", worst, bound)
		}
		t.Logf("worst of 20 failovers: %s (bound %s)", worst, bound)
	})
}

// A paced leader heartbeats each follower once per instant of the grid,
// at the instant, and never on raft's own timer.
func TestPacedLeaderHeartbeatsOnTheGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		time.Sleep(time.Second)
		sleepPastInstant(testEvery, testEvery/2) // count over a second that starts between two instants
		l := g.leader()
		g.heartbeats()
		time.Sleep(time.Second)
		sent := g.heartbeats()
		if g.leader() != l {
			t.Fatal("the leader changed")
		}
		per := map[int]int{}
		for _, hb := range sent {
			if hb.from != l {
				t.Fatalf("replica %d, not the leader %d, sent a heartbeat", hb.from, l)
			}
			if off := hb.at.UnixNano() % int64(testEvery); off != 0 {
				t.Fatalf("a heartbeat to %d left %s past an instant, off the grid", hb.to, time.Duration(off))
			}
			per[hb.to]++
		}
		want := int(time.Second / testEvery)
		if len(per) != 2 || per[(l+1)%3] != want || per[(l+2)%3] != want {
			t.Fatalf("heartbeats per follower in a second: %v, want %d to each of 2", per, want)
		}
	})
}
