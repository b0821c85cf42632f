package cluster

import (
	"context"
	"fmt"
	"time"
)

// leaderPoll is how often a forwarded meta write looks whether the leader
// it was sent to is still the one this node knows of.
const leaderPoll = 50 * time.Millisecond

// whileLeads runs send, a write forwarded to leader, and gives up on it as
// soon as leaderNow names another leader (or none): a leader that stopped
// answering (SIGSTOP, a VM pause, a one-way cut; its connection stays up)
// would otherwise hold the write for the caller's whole deadline although
// its group elected another within a second. A new shard leader's report
// was held so for opTimeout (5 s), and clients routed its group's checks
// to the paused node meanwhile. Meta commands are idempotent, so the
// retry that follows is safe whatever the abandoned call did. The error
// then wraps ErrNoLeader, which ApplyMeta retries.
func whileLeads(ctx context.Context, leader string, leaderNow func() string, send func(context.Context) error) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- send(sctx) }()
	t := time.NewTicker(leaderPoll)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if now := leaderNow(); now != leader {
				cancel()
				<-done
				return fmt.Errorf("meta write sent to %s, which is no longer the leader (now %q): %w", leader, now, ErrNoLeader)
			}
		}
	}
}
