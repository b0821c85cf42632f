package cluster

import (
	"sync"
	"time"
)

// grid is a node's heartbeat clock: instants every apart, multiples of
// every since the Unix epoch, so that the instants of every node whose
// clock is right are the same. On each instant every group the node leads
// heartbeats its followers, and every group it follows checks that it
// heard its leader's heartbeat of the instant before (pacer).
//
// hashicorp/raft gives each group's leader a heartbeat timer of its own
// per follower, and each follower a timer of its own. Spread over time,
// those are dozens of separate wakeups a second per node, each costing
// thread switches on both ends of a message; on an idle cluster they were
// nearly all the work. On a shared grid the heartbeats of all groups
// leave together, arrive together and are answered together, the way
// CockroachDB coalesces heartbeats per pair of nodes: a few wakeups a
// second per node, whatever the number of groups.
type grid struct {
	every time.Duration

	mu   sync.Mutex
	next chan struct{} // closed at the next instant; nil when nobody waits
}

// gridEvery is the period of a node's grid for heartbeat timeout hb and
// leader lease lease: 2/5 of the shorter, so that a follower that missed
// one heartbeat learns it at the next instant, before its heartbeat
// timeout ends (2 × every <= hb), and a leader hears from its followers
// well within its lease.
func gridEvery(hb, lease time.Duration) time.Duration {
	return 2 * min(hb, lease) / 5
}

func newGrid(every time.Duration) *grid { return &grid{every: every} }

// suspect is how long a follower may go without hearing its leader before
// it suspects it: one period and a half, so that it missed the heartbeat
// of the instant before (half a period allows for the clocks of two nodes
// and the trip).
func (g *grid) suspect() time.Duration { return g.every * 3 / 2 }

// silent is how long a follower may go without hearing its leader before
// Route sends it no more checks: the heartbeats of two instants missed
// (400 ms by default, against an election after 500-625 ms). A leader
// stalled by its disk still heartbeats on raft's own timer, every
// 200-400 ms, so a healthy but slow leader is rarely taken for a silent
// one, and then costs its checks a retry, not an error.
func (g *grid) silent() time.Duration { return 2 * g.every }

// tick returns a channel closed at the grid's next instant. The timer
// runs only while somebody waits for it.
func (g *grid) tick() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.next == nil {
		ch := make(chan struct{})
		g.next = ch
		due := g.every - time.Duration(time.Now().UnixNano()%int64(g.every))
		time.AfterFunc(due, func() {
			g.mu.Lock()
			g.next = nil
			g.mu.Unlock()
			close(ch)
		})
	}
	return g.next
}
