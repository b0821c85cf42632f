package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster/linger"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// fakeNodes answers the coalescer's calls after a delay, recording each
// call: its node, its keys, and whether it was a batch.
type fakeNodes struct {
	delay time.Duration
	// refuse, if set, is an error for a batch call (before any answer).
	refuse error
	// item, if set, answers one check of a batch in place of a decision.
	item func(key string) *pb.AllowBatchItem
	// invalid keys are refused by single calls with InvalidArgument, and
	// so is a batch holding one, naming it by its index if numbered, as
	// a node does, or not ("requests[i]").
	invalid  map[string]bool
	numbered bool

	mu    sync.Mutex
	calls []call
}

type call struct {
	addr     string
	keys     []string
	batch    bool
	deadline time.Time
	md       bool
}

func (f *fakeNodes) record(ctx context.Context, addr string, batch bool, reqs ...*pb.AllowRequest) {
	c := call{addr: addr, batch: batch}
	c.deadline, _ = ctx.Deadline()
	_, c.md = metadata.FromOutgoingContext(ctx)
	for _, r := range reqs {
		c.keys = append(c.keys, r.Key)
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

func (f *fakeNodes) wait(ctx context.Context) error {
	select {
	case <-time.After(f.delay):
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (f *fakeNodes) one(ctx context.Context, addr string, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	f.record(ctx, addr, false, req)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	if f.invalid[req.Key] {
		return nil, status.Error(codes.InvalidArgument, "key: refused")
	}
	return &pb.AllowResponse{Allowed: true, Key: req.Key}, nil
}

func (f *fakeNodes) many(ctx context.Context, addr string, reqs []*pb.AllowRequest) (*pb.AllowBatchResponse, error) {
	f.record(ctx, addr, true, reqs...)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	if f.refuse != nil {
		return nil, f.refuse
	}
	out := &pb.AllowBatchResponse{}
	for i, r := range reqs {
		if f.invalid[r.Key] && f.numbered {
			return nil, status.Errorf(codes.InvalidArgument, "invalid request: requests[%d].key: refused", i)
		}
		if f.invalid[r.Key] {
			return nil, status.Error(codes.InvalidArgument, "requests[i].key: refused")
		}
		it := &pb.AllowBatchItem{Response: &pb.AllowResponse{Allowed: true, Key: r.Key}}
		if f.item != nil {
			if x := f.item(r.Key); x != nil {
				it = x
			}
		}
		out.Results = append(out.Results, it)
	}
	return out, nil
}

func (f *fakeNodes) log() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fakeNodes) coalescer() *coalescer { return newCoalescer(f.one, f.many) }

// check is one caller's Allow through co, with a 3s deadline like the
// client's CallTimeout.
func check(co *coalescer, addr, key string) (*pb.AllowResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return co.allow(ctx, addr, &pb.AllowRequest{Key: key})
}

// answers runs check for each key at once and returns what each got.
func answers(co *coalescer, addr string, keys []string) map[string]error {
	var mu sync.Mutex
	got := map[string]error{}
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() {
			resp, err := check(co, addr, k)
			if err == nil && resp.Key != k {
				err = fmt.Errorf("got the answer for %q", resp.Key)
			}
			mu.Lock()
			got[k] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

// settle lets co's drains finish (a drain may linger after its last
// batch, waiting for callers that will not come) and checks that every
// lane is left with no call in flight and nothing queued. Fake time stops
// once a bubble's main goroutine returns, so every test ends with it.
func settle(t *testing.T, co *coalescer) {
	t.Helper()
	time.Sleep(2 * linger.MaxWait)
	synctest.Wait()
	co.mu.Lock()
	defer co.mu.Unlock()
	for addr, l := range co.lanes {
		if l.busy != 0 || len(l.queue) != 0 {
			t.Errorf("lane %s left with %d calls in flight and %d checks queued", addr, l.busy, len(l.queue))
		}
	}
}

// fill puts laneLight lone checks in flight to addr, so that the next
// checks for it queue; it returns once they are in flight.
func fill(co *coalescer, addr string) {
	for i := range laneLight {
		go check(co, addr, fmt.Sprintf("fill%d", i))
	}
	synctest.Wait()
}

// keysOf names n keys.
func keysOf(prefix string, n int) []string {
	var ks []string
	for i := range n {
		ks = append(ks, fmt.Sprintf("%s%d", prefix, i))
	}
	return ks
}

// A lone check is its own call, sent at once by its caller.
func TestLoneCheckGoesAloneAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		co := f.coalescer()
		start := time.Now()
		if _, err := check(co, "n1", "k"); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Millisecond {
			t.Errorf("took %v, want the call's 1ms", took)
		}
		if calls := f.log(); len(calls) != 1 || calls[0].batch {
			t.Errorf("calls %+v, want one single call", calls)
		}
		settle(t, co)
	})
}

// Checks that come while a call is in flight to their node wait for it
// and then go out together in one batch, each answered with its own
// decision; checks bound for another node do not wait.
func TestChecksDuringACallGoTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: 2 * time.Millisecond}
		co := f.coalescer()
		fill(co, "n1") // its call is in flight
		var other time.Duration
		go func() {
			start := time.Now()
			check(co, "n2", "elsewhere")
			other = time.Since(start)
		}()
		start := time.Now()
		got := answers(co, "n1", keysOf("k", 5))
		for k, err := range got {
			if err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
		if took := time.Since(start); took != 4*time.Millisecond {
			t.Errorf("the queued checks took %v, want 4ms: the call in flight, then theirs", took)
		}
		synctest.Wait()
		if other != 2*time.Millisecond {
			t.Errorf("a check for another node took %v, want 2ms", other)
		}
		var batches [][]string
		for _, c := range f.log() {
			if c.batch {
				batches = append(batches, c.keys)
			}
		}
		if len(batches) != 1 || len(batches[0]) != 5 {
			t.Errorf("batches %v, want one of the 5 queued checks", batches)
		}
		if want := laneLight + 2; len(f.log()) != want {
			t.Errorf("%d calls, want %d (those in flight, elsewhere, the batch)", len(f.log()), want)
		}
		settle(t, co)
	})
}

// A caller that gives up while its check waits returns at once, with
// the context's code, and its check is never sent; a batch call lasts
// until the last of its callers' deadlines, whoever gave up first.
func TestGivingUpWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: 10 * time.Millisecond}
		co := f.coalescer()
		fill(co, "n1")
		short, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		start := time.Now()
		done := make(chan error)
		go func() {
			_, err := co.allow(short, "n1", &pb.AllowRequest{Key: "impatient"})
			done <- err
		}()
		long, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		mid, cancel3 := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel3()
		go co.allow(mid, "n1", &pb.AllowRequest{Key: "a"})
		go co.allow(long, "n1", &pb.AllowRequest{Key: "b"})
		if err := <-done; status.Code(err) != codes.DeadlineExceeded || time.Since(start) != time.Millisecond {
			t.Errorf("after %v: %v, want DeadlineExceeded after 1ms", time.Since(start), err)
		}
		time.Sleep(100 * time.Millisecond)
		for _, c := range f.log() {
			for _, k := range c.keys {
				if k == "impatient" {
					t.Errorf("the check of a caller that gave up was sent: %+v", c)
				}
			}
			if c.batch {
				if want := start.Add(time.Second); !c.deadline.Equal(want) {
					t.Errorf("batch deadline %v after start, want the last caller's (1s)", c.deadline.Sub(start))
				}
			}
		}
		settle(t, co)
	})
}

// A caller whose context carries outgoing metadata gets a call of its
// own even while another is in flight: a shared call would carry only
// one caller's metadata.
func TestMetadataGoesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		co := f.coalescer()
		fill(co, "n1")
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "tenant", "a"), time.Second)
		defer cancel()
		start := time.Now()
		if _, err := co.allow(ctx, "n1", &pb.AllowRequest{Key: "mine"}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Millisecond {
			t.Errorf("took %v, want its own call's 1ms", took)
		}
		if calls := f.log(); len(calls) != laneLight+1 || calls[laneLight].batch || !calls[laneLight].md {
			t.Errorf("calls %+v", calls)
		}
		settle(t, co)
	})
}

// No batch passes the node's limit on a batch's checks.
func TestBatchesAreCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		co := f.coalescer()
		fill(co, "n1")
		answers(co, "n1", keysOf("k", 2500))
		total := 0
		for _, c := range f.log() {
			if len(c.keys) > 1000 {
				t.Errorf("a call of %d checks", len(c.keys))
			}
			total += len(c.keys)
		}
		if total != 2500+laneLight {
			t.Errorf("%d checks sent, want %d", total, 2500+laneLight)
		}
		settle(t, co)
	})
}

// A fixed set of callers in a closed loop (each checks again as soon as
// it is answered) ends up in one batch a round trip, not split into a
// lone call and a batch of the rest taking turns: after a large batch is
// answered its callers are waited for, briefly. The node is asked far
// fewer calls than checks.
func TestClosedLoopCallersShareCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		co := f.coalescer()
		const callers = 16
		var wg sync.WaitGroup
		end := time.Now().Add(200 * time.Millisecond)
		for i := range callers {
			wg.Go(func() {
				for n := 0; time.Now().Before(end); n++ {
					// Callers take a little time between checks, as
					// real ones do.
					time.Sleep(time.Duration(i) * 10 * time.Microsecond)
					if _, err := check(co, "n1", fmt.Sprintf("c%d-%d", i, n)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		calls := f.log()
		checks, big := 0, 0
		for _, c := range calls[len(calls)/2:] { // the steady state
			checks += len(c.keys)
			if len(c.keys) >= callers*8/10 {
				big++
			}
		}
		half := len(calls) - len(calls)/2
		if big*10 < half*9 {
			t.Errorf("%d of the last %d calls carry at least %d checks; sizes %v", big, half, callers*8/10, sizes(calls[len(calls)/2:]))
		}
		if checks < half*linger.MinBatch {
			t.Errorf("%d checks in %d calls", checks, half)
		}
		settle(t, co)
	})
}

func sizes(cs []call) []int {
	var out []int
	for _, c := range cs {
		out = append(out, len(c.keys))
	}
	return out
}

// Under a light load (no batch of linger.MinBatch yet), a check that
// comes while another's call is in flight goes at once, up to laneLight
// calls: waiting would only add a round trip to its latency. Once a large
// batch has gone, one call at a time.
func TestLightLoadDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		co := f.coalescer()
		start := time.Now()
		answers(co, "n1", keysOf("light", laneLight))
		if took := time.Since(start); took != time.Millisecond {
			t.Errorf("%d checks at once took %v, want one round trip", laneLight, took)
		}
		for _, c := range f.log() {
			if c.batch {
				t.Errorf("a batch under light load: %v", c.keys)
			}
		}
		fill(co, "n1")
		answers(co, "n1", keysOf("heavy", 2*linger.MinBatch)) // a batch of 8
		// Checks that come now wait while the batch's callers are waited
		// for, and go out together.
		n := len(f.log())
		answers(co, "n1", keysOf("then", 2))
		if got := f.log()[n:]; len(got) != 1 || !got[0].batch {
			t.Errorf("after a large batch: %+v, want the two in one batch", got)
		}
		// That batch was small: the load is light again.
		n = len(f.log())
		start = time.Now()
		answers(co, "n1", keysOf("light again", 2))
		if got := f.log()[n:]; len(got) != 2 || got[0].batch || got[1].batch || time.Since(start) != time.Millisecond {
			t.Errorf("after a small batch: %+v in %v, want two lone calls at once", got, time.Since(start))
		}
		settle(t, co)
	})
}

// A waiter whose caller gave up is answered with its context's error, not
// left with neither answer nor error: its caller may read done before
// noticing its own context ended.
func TestGivenUpWaiterGetsAnError(t *testing.T) {
	f := &fakeNodes{}
	co := f.coalescer()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &waiter{ctx: ctx, req: &pb.AllowRequest{Key: "gone"}, done: make(chan struct{})}
	co.send("n1", []*waiter{w})
	<-w.done
	if w.resp != nil || status.Code(w.err) != codes.Canceled {
		t.Errorf("resp %v, err %v; want Canceled", w.resp, w.err)
	}
	if len(f.log()) != 0 {
		t.Errorf("sent %+v", f.log())
	}
}

// Callers without a deadline share a call with none: a batch is not cut
// off at another caller's deadline, nor sent already expired.
func TestCallersWithoutDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		co := f.coalescer()
		fill(co, "n1")
		short, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for i, ctx := range []context.Context{context.Background(), short, context.Background()} {
			wg.Go(func() {
				if _, err := co.allow(ctx, "n1", &pb.AllowRequest{Key: fmt.Sprint(i)}); err != nil {
					t.Errorf("caller %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		for _, c := range f.log() {
			if c.batch && !c.deadline.IsZero() {
				t.Errorf("a batch with callers without deadline has one: %v", c.deadline)
			}
		}
		settle(t, co)
	})
}

// Two drains gathering at once (the load grew while calls were in
// flight) each end: the one woken, and the other by its linger.
func TestTwoDrainsGathering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		co := f.coalescer()
		// Two rounds of closed-loop callers on one lane, started while
		// laneLight calls are in flight, so several drains run.
		fill(co, "n1")
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				for n := range 20 {
					if _, err := check(co, "n1", fmt.Sprintf("c%d-%d", i, n)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		settle(t, co)
	})
}
