package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A meta write forwarded to a leader that holds it without answering is
// given up within a poll of this node learning of another leader (or of
// none), not at the caller's deadline; a leader that answers is waited
// for however long it takes, and the caller's deadline still ends it.
func TestWhileLeads(t *testing.T) {
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	for _, c := range []struct {
		name    string
		next    string        // the leader after flip
		flip    time.Duration // when leaderNow changes (0: never)
		send    func(ctx context.Context) error
		want    error
		wantDur time.Duration
	}{
		{name: "replaced", next: "n2", flip: 700 * time.Millisecond, send: hang, want: ErrNoLeader, wantDur: 700 * time.Millisecond},
		{name: "lost", next: "", flip: 1200 * time.Millisecond, send: hang, want: ErrNoLeader, wantDur: 1200 * time.Millisecond},
		{name: "slow but leading", send: func(context.Context) error { time.Sleep(3 * time.Second); return nil }, wantDur: 3 * time.Second},
		{name: "refused", send: func(context.Context) error { return errTest }, want: errTest},
		{name: "deadline", send: hang, want: context.DeadlineExceeded, wantDur: 5 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var leader atomic.Value
				leader.Store("n1")
				if c.flip > 0 {
					time.AfterFunc(c.flip, func() { leader.Store(c.next) })
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				start := time.Now()
				err := whileLeads(ctx, "n1", func() string { return leader.Load().(string) }, c.send)
				took := time.Since(start)
				if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
					t.Fatalf("err %v, want %v", err, c.want)
				}
				if took < c.wantDur || took > c.wantDur+leaderPoll {
					t.Errorf("took %v, want %v to %v", took, c.wantDur, c.wantDur+leaderPoll)
				}
			})
		})
	}
}

var errTest = errors.New("refused by the leader")
