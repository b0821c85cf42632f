package fault

import (
	"context"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// splitVoteAllowance is how much longer than its bound a failover may take
// when its election was split: two followers that called their elections
// within a round trip of each other vote for themselves, and each waits
// for its election timer (500 ms to 1 s, hashicorp/raft's
// randomTimeout(ElectionTimeout)) before the next. Only a failover that
// took more than one term gets it (Fault.Elections), and the report says
// so: a slow failover of one election is still held to its bound.
const splitVoteAllowance = time.Second

// SetElections records how many terms the hot shard went through to its
// first leader after fault i.
func (h *History) SetElections(i, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults[i].Elections = n
}

// HotTerm returns the hot shard's term as the running nodes but skip
// report it (0 if none answers).
func (n *Nemesis) HotTerm(ctx context.Context, skip string) (term uint64, leader string) {
	for _, node := range n.C.Running() {
		if node.ID == skip {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		st, err := node.Admin().Status(cctx, &pb.StatusRequest{})
		cancel()
		if err != nil {
			continue
		}
		for _, s := range st.ShardStatus {
			if int(s.Id) == n.Shard {
				return s.Term, s.Leader
			}
		}
	}
	return 0, ""
}

// CountElections records, in the background, how many terms after before
// the hot shard's first leader other than lost took (History.SetElections),
// asking the nodes but lost every 50 ms for up to 10 s.
func (n *Nemesis) CountElections(ctx context.Context, i int, lost string, before uint64) {
	if before == 0 {
		return // not known: the fault is held to its bound as it is
	}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if term, leader := n.HotTerm(ctx, lost); leader != "" && leader != lost && term > before {
				n.H.SetElections(i, int(term-before))
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}
