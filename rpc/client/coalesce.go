package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster/linger"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

const (
	// laneBusy is how many calls a node has in flight from a client under
	// load, before further checks wait and go out together. One: the
	// node's group commit holds one entry in flight per group anyway, and
	// one call gathers the most checks (strict Allow through the SDK,
	// 64 callers, 3 rounds: 8.0–10.6k/s with one against 6.9–7.7k/s with
	// two).
	laneBusy = 1
	// laneLight is how many calls a node may have in flight while the
	// checks that waited were few (a batch under linger.MinBatch): a
	// light load, where a check waiting for another's call would only add
	// that call's round trip to its latency.
	laneLight = 4
)

// coalescer sends single checks to nodes, sharing calls between callers:
// a check that finds room (see lane.room) is sent at once, in its own
// Allow call, by its caller; checks that come while a node's calls are in
// flight wait, and the first call to come back sends them together as one
// AllowBatch, after waiting briefly (linger) for the callers it answered
// to come back. Under light load every check is its own call, as without
// it; under heavy load a node answers a few large calls instead of many
// small ones, which costs it and the client far less per check. The node
// answers each check of a batch alone, so each caller gets its own
// answer, as from its own call.
type coalescer struct {
	// one sends a single check to the node at addr.
	one func(ctx context.Context, addr string, req *pb.AllowRequest) (*pb.AllowResponse, error)
	// many sends checks to the node at addr in one AllowBatch call.
	many func(ctx context.Context, addr string, reqs []*pb.AllowRequest) (*pb.AllowBatchResponse, error)

	// onStall, when not nil, hears that a lane is stalled, and probe asks
	// a stalled lane's node whether it answers at all (stall.go). Both
	// are set once, before the first check.
	onStall func()
	probe   func(ctx context.Context, addr string) error

	// stalled holds the addresses of the stalled lanes (nil: none), read
	// without the lock by the client's routing (stall.go).
	stalled atomic.Pointer[map[string]bool]

	mu     sync.Mutex
	closed bool // the client closed: no lane is watched (stall.go)
	// lanes, by node address, are kept like the Client's connections:
	// one per address the client sends to, so a lone check costs no lane
	// made and dropped; the lane of an address the cluster no longer
	// lists goes with its connection (keepOnly).
	lanes map[string]*lane
}

// lane is the calls of one node. Checks queue only while a call is in
// flight, so a non-empty queue always has a call that will come back and
// send it.
type lane struct {
	addr  string
	busy  int // calls in flight
	queue []*waiter
	lg    linger.Policy
	// queuedThen is how many checks were queued when the last call came
	// back, and lastN how many that call carried (see take).
	queuedThen, lastN int
	// batchN is how many checks the last batch took from the queue.
	batchN int
	// want, when not zero, is the queue the gathering drain waits for:
	// the caller whose check brings the queue to it closes wake. (Two
	// drains gather at once only while the load grows; the one that set
	// want last is woken, the other waits out its linger.)
	want int
	wake chan struct{}
	// out holds when each call in flight was sent, and rtt how long the
	// last one that came back took (see take).
	out []time.Time
	rtt time.Duration
	// rescue, while set, is to send the checks a call left queued when it
	// freed its slot (rescueLater).
	rescue *time.Timer
	// The stall watch (stall.go): busySince is when the lane last went
	// from idle to busy, backAt when a call last came back; stalled says
	// nothing came back for stallAfter while calls were out, until one
	// does.
	busySince, backAt          time.Time
	watch                      *time.Timer
	watching, stalled, probing bool
}

// room says whether a check may be sent at once, in a call of its own:
// nothing waits before it, and fewer calls are in flight than the load
// allows (laneLight while the last batch was small, else laneBusy).
func (l *lane) room() bool { return len(l.queue) == 0 && l.busy < l.most() }

// most is how many calls may be in flight: laneLight while the last batch
// was small, else laneBusy.
func (l *lane) most() int {
	if l.batchN < linger.MinBatch {
		return laneLight
	}
	return laneBusy
}

// waiter is one caller's check waiting in a lane.
type waiter struct {
	ctx  context.Context // the caller's (the Client bounds it by CallTimeout)
	req  *pb.AllowRequest
	resp *pb.AllowResponse
	err  error
	done chan struct{}
}

func newCoalescer(one func(context.Context, string, *pb.AllowRequest) (*pb.AllowResponse, error),
	many func(context.Context, string, []*pb.AllowRequest) (*pb.AllowBatchResponse, error)) *coalescer {
	return &coalescer{one: one, many: many, lanes: map[string]*lane{}}
}

// allow checks req on the node at addr. A caller whose context carries
// outgoing gRPC metadata always gets a call of its own, since a shared
// call could carry only one caller's metadata.
func (co *coalescer) allow(ctx context.Context, addr string, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	if md, ok := metadata.FromOutgoingContext(ctx); ok && md.Len() > 0 {
		return co.one(ctx, addr, req)
	}
	co.mu.Lock()
	l := co.lanes[addr]
	if l == nil {
		l = &lane{addr: addr}
		co.lanes[addr] = l
	}
	if l.stalled {
		co.mu.Unlock()
		return nil, errStalled
	}
	if l.room() {
		l.busy++
		now := time.Now()
		l.out = append(l.out, now)
		co.watchStall(l, now)
		l.lg.Sent(1, 1, now)
		l.lastN = 1
		co.mu.Unlock()
		resp, err := co.one(ctx, addr, req)
		co.next(l, now, heard(ctx, err))
		return resp, err
	}
	w := &waiter{ctx: ctx, req: req, done: make(chan struct{})}
	l.queue = append(l.queue, w)
	if l.want > 0 && len(l.queue) >= l.want {
		close(l.wake)
		l.want, l.wake = 0, nil
	}
	co.mu.Unlock()
	select {
	case <-w.done:
		return w.resp, w.err
	case <-ctx.Done():
		// Whether the check was counted is unknown, as when a caller gives
		// up on a call of its own.
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// keepOnly drops the lanes of addresses not in conns (the Client's
// connections: those of nodes the cluster no longer lists are gone) that
// have nothing in flight or queued; a busy one goes at a later refresh.
func (co *coalescer) keepOnly(conns map[string]bool) {
	co.mu.Lock()
	defer co.mu.Unlock()
	for addr, l := range co.lanes {
		if !conns[addr] && l.busy == 0 && len(l.queue) == 0 {
			if l.watch != nil {
				l.watch.Stop()
			}
			co.setStalled(l, false)
			delete(co.lanes, addr)
		}
	}
}

// next is called when a caller's own call, sent at sent, has come back:
// the checks queued meanwhile go out in the call's place, from a new
// goroutine, so that the caller returns at once.
func (co *coalescer) next(l *lane, sent time.Time, heard bool) {
	co.mu.Lock()
	co.answered(l, sent, heard)
	batch, at := l.take()
	if batch == nil && len(l.queue) > 0 {
		co.rescueLater(l)
	}
	co.mu.Unlock()
	if batch != nil {
		go co.drain(l, batch, at)
	}
}

// drain sends batch, then whatever queued meanwhile, until nothing is
// queued.
func (co *coalescer) drain(l *lane, batch []*waiter, sent time.Time) {
	for batch != nil {
		heard := co.send(l.addr, batch)
		co.gather(l, sent, heard)
		co.mu.Lock()
		if batch, sent = l.take(); batch == nil && len(l.queue) > 0 {
			co.rescueLater(l)
		}
		co.mu.Unlock()
	}
}

// rescueLater sends the checks queued in l once a round trip has passed,
// unless a call took them meanwhile: take freed a slot with checks queued
// on the word of a call in flight, which may be one the node holds (a
// group electing its leader), and they waited for it, up to the stall
// watch's 500 ms. The caller holds co.mu.
func (co *coalescer) rescueLater(l *lane) {
	if l.rescue != nil {
		return // one is set
	}
	var self *time.Timer
	self = time.AfterFunc(2*l.rtt+linger.MaxWait, func() {
		co.mu.Lock()
		if l.rescue != self {
			co.mu.Unlock()
			return // a call took the queue since: its turn (take)
		}
		l.rescue = nil
		if len(l.queue) == 0 || l.stalled || co.closed {
			co.mu.Unlock()
			return
		}
		l.busy++ // a call of its own, beyond what the load allows
		batch, at := l.take()
		if batch == nil && len(l.queue) > 0 {
			co.rescueLater(l) // a call was sent meanwhile: its turn
		}
		co.mu.Unlock()
		if batch != nil {
			co.drain(l, batch, at)
		}
	})
	l.rescue = self
}

// gather waits, as linger says, for the callers of the batch sent at sent
// and just answered to come back.
func (co *coalescer) gather(l *lane, sent time.Time, heard bool) {
	co.mu.Lock()
	co.answered(l, sent, heard)
	target, until := l.lg.Wait(len(l.queue))
	wait := time.Until(until)
	if len(l.queue) >= target || wait <= 0 {
		co.mu.Unlock()
		return
	}
	wake := make(chan struct{})
	l.want, l.wake = target, wake
	co.mu.Unlock()
	t := time.NewTimer(wait)
	select {
	case <-wake:
	case <-t.C:
	}
	t.Stop()
	co.mu.Lock()
	if l.wake == wake {
		l.want, l.wake = 0, nil
	}
	co.mu.Unlock()
}

// answered records that a call of l sent at sent came back, heard says with
// word from its node (not ended by the callers' own deadline or cancel);
// the caller holds co.mu.
func (co *coalescer) answered(l *lane, sent time.Time, heard bool) {
	now := time.Now()
	l.lg.Answered(sent, now)
	if heard {
		l.rtt = now.Sub(sent) // not of a call its callers ended, or that sent nothing
	}
	if i := slices.Index(l.out, sent); i >= 0 {
		l.out = slices.Delete(l.out, i, i+1)
	}
	l.queuedThen = len(l.queue)
	if heard {
		l.backAt = now
		co.setStalled(l, false)
	}
}

// take takes the next batch queued in l, keeping the call slot of the
// call that came back, and returns it with when it is sent (now); with
// nothing queued it frees the slot and returns nil. The caller holds
// co.mu.
func (l *lane) take() ([]*waiter, time.Time) {
	// A call beyond what the load allows now (the load grew while it was
	// in flight) frees its slot even with checks queued when another call
	// in flight will be back soon to send them: one sent within about a
	// round trip. Freed behind a call the node holds (a group electing
	// its leader), the checks waited for it, up to the stall watch.
	now := time.Now()
	if len(l.queue) == 0 || l.busy > l.most() && l.backSoon(now) {
		l.busy--
		return nil, time.Time{}
	}
	n := min(len(l.queue), validate.MaxBatch)
	// linger counts the callers of the call that came back as on their
	// way back, besides those queued. Here they come back into this
	// queue: those queued since it came back, up to its size, are them,
	// and are counted once. (Group commit on the nodes counts them twice
	// on purpose: waiting longer there makes larger log entries, which
	// cost less CPU a check; a client's wait buys nothing of the kind.)
	l.lg.Sent(n, max(l.queuedThen, len(l.queue)-l.lastN), now)
	l.lastN, l.batchN = n, n
	batch := l.queue[:n:n]
	l.queue = l.queue[n:]
	if len(l.queue) == 0 {
		l.queue = nil // let the old array go
	}
	l.out = append(l.out, now)
	if l.rescue != nil {
		// A call takes the queue: the rescue is not needed (under a
		// steady load it would otherwise send a second call beside each
		// slow one, re-armed for as long as the queue never empties).
		l.rescue.Stop()
		l.rescue = nil
	}
	return batch, now
}

// backSoon reports whether a call in flight was sent within about a round
// trip (twice the last, and linger's longest wait) before now.
func (l *lane) backSoon(now time.Time) bool {
	soon := 2*l.rtt + linger.MaxWait
	return slices.ContainsFunc(l.out, func(sent time.Time) bool { return now.Sub(sent) < soon })
}

// send makes one call for batch and answers each waiter. It reports
// whether the node was heard from (see answered).
func (co *coalescer) send(addr string, batch []*waiter) bool { return co.sendAgain(addr, batch, false) }

// sendAgain is send; again says the node refused a check of this batch
// already (see below).
func (co *coalescer) sendAgain(addr string, batch []*waiter, again bool) bool {
	// A caller that gave up while queued has had its answer; sending its
	// check now would count what nobody waits for.
	live := batch[:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.err = status.FromContextError(err).Err() // should it read done first
			close(w.done)
			continue
		}
		live = append(live, w)
	}
	switch len(live) {
	case 0:
		return false // nothing sent, nothing heard
	case 1:
		w := live[0]
		w.resp, w.err = co.one(w.ctx, addr, w.req)
		close(w.done)
		return heard(w.ctx, w.err)
	}
	reqs := make([]*pb.AllowRequest, len(live))
	for i, w := range live {
		reqs[i] = w.req
	}
	// The call outlives any one caller, up to the last one's deadline; it
	// carries the first caller's values (a trace span, say).
	ctx, cancel := context.WithCancel(context.WithoutCancel(live[0].ctx))
	if last, ok := lastDeadline(live); ok {
		ctx, cancel = context.WithDeadline(ctx, last)
	}
	defer cancel()
	resp, err := co.many(ctx, addr, reqs)
	if err == nil && len(resp.Results) != len(live) {
		err = status.Error(codes.Internal, fmt.Sprintf("floodgate: %s answered %d of %d checks", addr, len(resp.Results), len(live)))
	}
	if j, jerr := itemError(err, len(live)); jerr != nil {
		// The node refused check j, and with it the whole call, before
		// counting anything: j has its answer, the others go again in
		// one call. (Sent each alone, one caller's check that only the
		// node refuses, retried at once, split nearly every batch.) A
		// node names one refused check a call: after a second refusal
		// the rest go each alone, all at once, so k refused checks cost
		// the others three round trips, not k+1 one after another (700
		// refused beside 100 good: 600 calls in a row, the good checks
		// past their deadline).
		live[j].err = jerr
		close(live[j].done)
		rest := slices.Delete(slices.Clone(live), j, j+1)
		if again {
			co.alone(addr, rest)
		} else {
			co.sendAgain(addr, rest, true)
		}
		return true
	}
	switch {
	case status.Code(err) == codes.InvalidArgument:
		// The node refused the batch, before counting anything, naming
		// no check of it: each check goes again alone, to get its own
		// answer.
		co.alone(addr, live)
	case err != nil:
		for _, w := range live {
			w.err = err
			close(w.done)
		}
	default:
		for i, w := range live {
			w.resp, w.err = itemOf(resp.Results[i])
			close(w.done)
		}
	}
	return heard(ctx, err)
}

// alone sends each waiter's check in a call of its own, all at once.
func (co *coalescer) alone(addr string, ws []*waiter) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			w.resp, w.err = co.one(w.ctx, addr, w.req)
			close(w.done)
		})
	}
	wg.Wait()
}

// itemOf turns one answer of a batch into what a call of its own would
// have returned.
func itemOf(it *pb.AllowBatchItem) (*pb.AllowResponse, error) {
	switch {
	case it.GetError() != nil:
		code := codes.Code(it.Error.Code)
		if code == codes.OK { // an error must not read as success
			code = codes.Unknown
		}
		return nil, status.Error(code, it.Error.Message)
	case it.GetResponse() == nil:
		return nil, status.Error(codes.Internal, "floodgate: an answer of a batch holds neither a decision nor an error")
	}
	return it.Response, nil
}

// lastDeadline is the latest deadline of ws; false if one has none.
func lastDeadline(ws []*waiter) (time.Time, bool) {
	var last time.Time
	for _, w := range ws {
		d, ok := w.ctx.Deadline()
		if !ok {
			return time.Time{}, false
		}
		if d.After(last) {
			last = d
		}
	}
	return last, true
}
