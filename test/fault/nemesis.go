package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/floodgate/floodgate/test/e2e"
)

// Fault is one injected fault, with when it started and ended (offsets in
// the history).
type Fault struct {
	Kind   string // "kill -9", "SIGSTOP", "partition", ...
	Target string // node ids
	At     time.Duration
	Healed time.Duration // zero until healed
	// LeaderLost says the hot shard's leader stopped without handing off
	// (kill -9): a failover, after which fast mode may lose up to its bound.
	LeaderLost bool
	// Within, if set, is how soon the hot shard must answer again.
	Within time.Duration
	// Elections is how many terms the hot shard's first new leader came
	// after (0: not counted); more than one is a split vote.
	Elections int
}

func (f Fault) String() string {
	s := fmt.Sprintf("%s %s at %s", f.Kind, f.Target, f.At.Round(time.Millisecond))
	if f.Healed > 0 {
		s += fmt.Sprintf(", healed at %s", f.Healed.Round(time.Millisecond))
	}
	if f.Elections > 1 {
		s += fmt.Sprintf(", %d elections", f.Elections)
	}
	return s
}

// Inject records a fault starting now and returns its index for Heal.
func (h *History) Inject(kind, target string, leaderLost bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, Fault{Kind: kind, Target: target, At: time.Since(h.start), LeaderLost: leaderLost})
	return len(h.faults) - 1
}

// Heal records that fault i ended now.
func (h *History) Heal(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults[i].Healed = time.Since(h.start)
}

// Require records that the hot shard must answer within d of fault i.
func (h *History) Require(i int, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults[i].Within = d
}

// Faults returns the recorded faults.
func (h *History) Faults() []Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Fault(nil), h.faults...)
}

// Nemesis injects faults into a cluster and records them in a history.
type Nemesis struct {
	C     *e2e.Cluster
	H     *History
	Rand  *rand.Rand
	Shard int // the hot shard
}

// Between returns a random duration in [lo, hi].
func (n *Nemesis) Between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.Rand.Int64N(int64(hi-lo)+1))
}

// Leader returns the running node that leads the hot shard, as every
// running node's status agrees, waiting for one until ctx ends.
func (n *Nemesis) Leader(ctx context.Context) (*e2e.Node, error) {
	return waitFor(ctx, "a leader of the hot shard", func(ctx context.Context) (*e2e.Node, error) {
		st, err := n.C.Status(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range st.ShardStatus {
			if int(s.Id) != n.Shard {
				continue
			}
			for _, node := range n.C.Running() {
				if node.ID == s.Leader {
					return node, nil
				}
			}
			return nil, fmt.Errorf("shard %d led by %q, not a running node", n.Shard, s.Leader)
		}
		return nil, fmt.Errorf("status lists no shard %d", n.Shard)
	})
}

// Follower returns a running replica of the hot shard that does not lead it.
func (n *Nemesis) Follower(ctx context.Context) (*e2e.Node, error) {
	leader, err := n.Leader(ctx)
	if err != nil {
		return nil, err
	}
	st, err := n.C.Status(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range st.ShardStatus {
		if int(s.Id) != n.Shard {
			continue
		}
		for _, r := range s.Replicas {
			for _, node := range n.C.Running() {
				if node.ID == r.NodeId && node != leader {
					return node, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("shard %d has no running follower", n.Shard)
}

// KillRestart kills node with SIGKILL and starts it again on its data
// after down.
func (n *Nemesis) KillRestart(ctx context.Context, node *e2e.Node, leader bool, down time.Duration) error {
	node.Kill()
	// The fault starts once the process is dead: until then it answers.
	i := n.H.Inject("kill -9", node.ID, leader)
	if err := pause(ctx, down); err != nil {
		return err
	}
	if err := node.Start(); err != nil {
		return err
	}
	n.H.Heal(i)
	return node.WaitServing(ctx)
}

// Pause stops node with SIGSTOP for d, then resumes it with SIGCONT. With
// within set, the hot shard must answer again that soon, paused or not.
func (n *Nemesis) Pause(ctx context.Context, node *e2e.Node, d, within time.Duration) error {
	before, _ := n.HotTerm(ctx, "")
	if err := node.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// Recorded once the signal is sent: a call answered before it is no
	// failover.
	i := n.H.Inject(fmt.Sprintf("SIGSTOP %.1fs", d.Seconds()), node.ID, false)
	n.H.Require(i, within)
	if within > 0 {
		n.CountElections(ctx, i, node.ID, before)
	}
	err := pause(ctx, d)
	if cerr := node.Signal(syscall.SIGCONT); cerr != nil && err == nil {
		err = cerr
	}
	n.H.Heal(i)
	return err
}

// Settle waits until every shard is back with its placed replicas and
// preferred leaders, so the next round starts from a healthy cluster.
func (n *Nemesis) Settle(ctx context.Context, within time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return n.C.WaitSettled(sctx)
}

// pause waits for d: it is the length of a fault, not an assertion.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// waitFor calls f until it succeeds or ctx ends, returning its last error.
func waitFor[T any](ctx context.Context, what string, f func(context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		v, err := f(cctx)
		cancel()
		if err == nil {
			return v, nil
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
