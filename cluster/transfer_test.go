package cluster

import (
	"context"
	"testing"
	"time"
)

// A leadership transfer asked of a group that already shut down ends with
// an error. hashicorp/raft may take such a request into its buffered
// channel and never answer it (each call does so with even odds until the
// channel is full); an unbounded wait on it held Node.Close up for good in
// a CI run, when a leaving node's reconciler asked a group that had shut
// itself down on its removal. Real time, not a synctest bubble: the
// goroutine left waiting on the unanswered future never ends, by design.
func TestTransferLeadershipOfAShutGroupEnds(t *testing.T) {
	m := newMemGroup(t, 1)
	g := &Group{name: "shard-0", raft: m.rafts[0]}
	m.close()
	bound := 3 * g.raft.ReloadableConfig().ElectionTimeout
	for i := range 8 {
		done := make(chan error, 1)
		go func() { done <- g.transferLeadership(context.Background(), nil) }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("call %d: a shut group transferred its leadership", i)
			}
		case <-time.After(bound + 5*time.Second):
			t.Fatalf("call %d: no answer %s after the transfer's bound", i, 5*time.Second)
		}
	}
}
