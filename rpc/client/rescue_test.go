package client

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A call that comes back beyond what a grown load allows frees its slot
// with checks queued on the word of another call in flight; when that one
// is held (a group electing its leader, 2 s here), the queued checks go
// out a round trip later anyway. They waited for it before, until the
// stall watch took the node for stalled (500 ms) and failed them.
func TestQueuedChecksAreNotLeftBehindAHeldCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		held := func(ctx context.Context, addr string, req *pb.AllowRequest) (*pb.AllowResponse, error) {
			if req.Key == "held" {
				select {
				case <-time.After(2 * time.Second):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &pb.AllowResponse{Allowed: true, Key: req.Key}, nil
			}
			return f.one(ctx, addr, req)
		}
		co := newCoalescer(held, f.many)
		go check(co, "n1", "held") // a call of its own, held
		for _, k := range keysOf("fill", laneLight-1) {
			go check(co, "n1", k) // calls of their own, 1 ms
		}
		synctest.Wait()
		var wg sync.WaitGroup
		for _, k := range keysOf("first", 10) { // queued behind the 4 calls; then one batch: the load is high
			wg.Go(func() { check(co, "n1", k) })
		}
		synctest.Wait()
		time.Sleep(1500 * time.Microsecond) // the batch is out
		start := time.Now()
		var mu sync.Mutex
		var slowest time.Duration
		for _, k := range keysOf("second", 10) {
			wg.Go(func() {
				_, err := check(co, "n1", k)
				mu.Lock()
				defer mu.Unlock()
				slowest = max(slowest, time.Since(start))
				if err != nil {
					t.Errorf("%s: %v", k, err)
				}
			})
		}
		wg.Wait()
		if slowest > 50*time.Millisecond {
			t.Errorf("checks queued behind a 1 ms batch answered after %v: they waited for the held call", slowest)
		}
		time.Sleep(3 * time.Second)
		settle(t, co)
	})
}

// Under a steady load whose batches now and then take longer (every fifth
// 40 ms against 3 ms: a GC pause, an fsync), the lane keeps one batch in
// flight: a call that takes the queue cancels the rescue a freed slot
// left. (Left armed, it re-armed for as long as the queue never emptied,
// and sent a second batch beside each slow one: 95 in 3 s.)
func TestASteadyLoadKeepsOneBatchInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		one := func(ctx context.Context, addr string, req *pb.AllowRequest) (*pb.AllowResponse, error) {
			time.Sleep(3 * time.Millisecond)
			return &pb.AllowResponse{Allowed: true, Key: req.Key}, nil
		}
		var batches, inFlight, beside atomic.Int64
		warm := time.Now().Add(500 * time.Millisecond)
		many := func(ctx context.Context, addr string, reqs []*pb.AllowRequest) (*pb.AllowBatchResponse, error) {
			if inFlight.Add(1) > 1 && time.Now().After(warm) {
				beside.Add(1)
			}
			defer inFlight.Add(-1)
			d := 3 * time.Millisecond
			if batches.Add(1)%5 == 0 {
				d = 40 * time.Millisecond
			}
			time.Sleep(d)
			resp := &pb.AllowBatchResponse{}
			for _, r := range reqs {
				resp.Results = append(resp.Results, &pb.AllowBatchItem{Response: &pb.AllowResponse{Allowed: true, Key: r.Key}})
			}
			return resp, nil
		}
		co := newCoalescer(one, many)
		var wg sync.WaitGroup
		for stop := time.Now().Add(3 * time.Second); time.Now().Before(stop); time.Sleep(100 * time.Microsecond) {
			wg.Go(func() { check(co, "n1", "k") })
		}
		wg.Wait()
		if n := beside.Load(); n > 0 {
			t.Errorf("%d batches sent beside another after the warm-up (of %d)", n, batches.Load())
		}
		settle(t, co)
	})
}
