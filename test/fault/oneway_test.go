package fault

import (
	"context"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// healBound is how soon after a one-way cut heals every node must answer
// the hot shard again, asked over a new connection.
const healBound = 2 * time.Second

// oneWay drops what the hot shard's leader sends for 10–12 s, then what it
// receives, and after each cut heals asks every node for the hot shard.
// Under a one-way cut a leader that cannot hear steps down only when its
// lease ends, and followers that cannot hear it elect another. After a
// long cut, connections to and from the node wait out TCP's
// retransmission backoff, seconds long by then: a node must not wait for
// it before it serves again.
func oneWay(ctx context.Context, e *env) error {
	for _, out := range []bool{true, false} {
		l, err := e.warmLeader(ctx)
		if err != nil {
			return err
		}
		idx := slices.Index(e.c.Nodes, l)
		kind, cut := "cut into", e.net.CutIn
		if out {
			kind, cut = "cut out of", e.net.CutOut
		}
		before, _ := e.n.HotTerm(ctx, "")
		if err := cut(idx); err != nil {
			return err
		}
		// Recorded once the cut is in place (its second command): a call
		// answered while the commands ran is no failover.
		f := e.h.Inject(kind, l.ID, false)
		e.h.Require(f, failoverBound)
		e.n.CountElections(ctx, f, l.ID, before)
		err = pause(ctx, e.n.Between(10*time.Second, 12*time.Second))
		if uerr := e.net.Uncut(idx); uerr != nil {
			return uerr
		}
		e.h.Heal(f)
		e.answerAgain(ctx, kind+" "+l.ID)
		if err != nil {
			return err
		}
		if err := e.n.Settle(ctx, 40*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// answerAgain peeks a hot key through every node, each time over a new
// connection, until each answers, and records a violation for a node
// that took longer than healBound. A new connection, as a client that
// gave up on its old one would dial: the client's own connection waits
// out its own backoff, which is the client's to bound (gRPC keepalive),
// not the node's.
func (e *env) answerAgain(ctx context.Context, after string) {
	healed := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	zero := int64(0)
	req := &pb.AllowRequest{Key: e.keys[0], Limit: hourLimit(), Cost: &zero}
	for i, n := range e.c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cc, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					e.t.Error(err)
					return
				}
				op := e.h.Do(ctx, 2000+i, Caller{Via: n.ID, Allow: func(ctx context.Context, r *pb.AllowRequest) (*pb.AllowResponse, error) {
					return pb.NewRateLimiterClient(cc).Allow(ctx, r)
				}}, req, 500*time.Millisecond)
				cc.Close()
				if op.Outcome == Unknown {
					continue
				}
				took := time.Since(healed)
				e.t.Logf("after the %s healed, %s answered the hot shard in %s", after, n.ID, took.Round(time.Millisecond))
				if took > healBound {
					mu.Lock()
					e.violate("%s answered the hot shard only %s after the %s healed, want within %s", n.ID, took.Round(time.Millisecond), after, healBound)
					mu.Unlock()
				}
				return
			}
		}()
	}
	wg.Wait()
}
