package rpc

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/peer"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/cluster/linger"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/metrics"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/rpc/sent"
	"github.com/floodgate/floodgate/tracing"
)

// errNotSent means a forward never left this node (the peer's connection
// was down): nothing was written, so it may be retried elsewhere.
var errNotSent = fmt.Errorf("peer unreachable, check not sent: %w", cluster.ErrNoLeader)

const (
	// forwardInFlight is how many Forward calls may be outstanding to one
	// peer; checks arriving meanwhile wait and go out together. One, like
	// the batcher's one entry in flight: the peer's leader commits one
	// entry at a time anyway, and fewer, larger calls cost less (strict
	// Allow over 3 nodes: 8.8k/s with 1, 8.1k with 2, 6.2k with 8; p99
	// 15 ms against 65 ms with 8).
	forwardInFlight = 1
	// forwardMaxChecks caps one Forward call.
	forwardMaxChecks = 4096
	// forwardTimeout bounds a Forward call: the receiver's commit timeout
	// plus slack.
	forwardTimeout = 7 * time.Second
	// connectWait is how long a forward waits for a peer connection that
	// is not ready before giving up without sending.
	connectWait = 250 * time.Millisecond
)

// forwarder sends checks to the nodes that lead their shards, batching
// concurrent checks bound for the same peer into one call.
type forwarder struct {
	peers *Peers
	// routes, when not nil, withdraws queued forwards whose group's
	// leader has moved (await).
	routes routeWatch

	mu       sync.Mutex
	queues   map[string]*peerQueue
	sweeping bool // forgetIdle runs (forget.go)
}

func newForwarder(peers *Peers, routes routeWatch) *forwarder {
	return &forwarder{peers: peers, routes: routes, queues: map[string]*peerQueue{}}
}

// fwdReq is one caller's checks of one shard.
type fwdReq struct {
	// ctx is the caller's: a request whose caller has given up is not
	// sent, and the call carrying it lasts no longer than its callers.
	ctx     context.Context
	shard   int
	checks  []fsm.Check
	results []policy.Result
	err     error
	done    chan struct{}
	// state says whether the queue took the request (to send it, or to
	// answer it unsent) or its caller withdrew it first (fwdReq.claim).
	state atomic.Int32
}

// forward evaluates checks of shard on the node at addr, the leader this
// node's route names. A NotLeaderError or errNotSent means nothing was
// counted.
func (f *forwarder) forward(ctx context.Context, addr string, shard int, checks []fsm.Check) ([]policy.Result, error) {
	return f.forwardTo(ctx, cluster.Route{Addr: addr}, shard, checks)
}

// forwardTo is forward to the peer rt names, which may be a not-leader
// answer's hint (see await).
func (f *forwarder) forwardTo(ctx context.Context, rt cluster.Route, shard int, checks []fsm.Check) ([]policy.Result, error) {
	addr := rt.Addr
	req := &fwdReq{ctx: ctx, shard: shard, checks: checks, done: make(chan struct{})}
	q := f.queue(addr)
	if q.takeIdle() {
		q.send([]*fwdReq{req})
		q.giveBack()
		return req.results, req.err
	}
	q.waiting.Add(1)
	select {
	case q.in <- req:
	case <-f.peers.closed:
		q.waiting.Add(-1)
		return nil, fmt.Errorf("forward to %s: %w", addr, errNotSent)
	case <-ctx.Done():
		q.waiting.Add(-1)
		return nil, fmt.Errorf("forward to %s: %w: %w", addr, cluster.ErrNoLeader, ctx.Err())
	}
	return f.await(ctx, q, req, rt)
}

// forwardSpan starts the span of one Forward call: the call carries the
// checks of many callers, so it continues the first caller's trace and
// links the others', and the peer's spans join that trace.
func forwardSpan(ctx context.Context, addr string, batch []*fwdReq, checks int) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx) // the call's own context, holding no span: a no-op
	}
	links := make([]trace.Link, 0, len(batch)-1)
	for _, r := range batch[1:] {
		if sc := trace.SpanContextFromContext(r.ctx); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(batch[0].ctx))
	return tracing.Tracer().Start(ctx, "floodgate.forward", trace.WithLinks(links...), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("floodgate.peer", addr), attribute.Int("floodgate.checks", checks), attribute.Int("floodgate.callers", len(batch))))
}

func (f *forwarder) queue(addr string) *peerQueue {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[addr]
	if q == nil {
		q = newPeerQueue(addr, f.peers)
		f.queues[addr] = q
		go q.loop()
		if !f.sweeping {
			f.sweeping = true
			go sweepEvery(f.peers.closed, forgetEvery, f.forgetIdle)
		}
	}
	q.used = time.Now()
	return q
}

// newPeerQueue returns the queue of forwards to the peer at addr; its loop
// is not running yet.
func newPeerQueue(addr string, peers *Peers) *peerQueue {
	return &peerQueue{addr: addr, peers: peers, in: make(chan *fwdReq, 1024), done: make(chan struct{}), retire: make(chan struct{}),
		slots: make(chan struct{}, forwardInFlight), freed: make(chan struct{}, 1)}
}

// peerQueue batches forwards to one peer. A forward that finds the
// queue idle (no call in flight, nothing waiting) is sent by its caller,
// on its own goroutine: at a light load nearly every forward is, and it
// then costs no wakeup of the loop, of a sending goroutine and of the
// caller again, each of which on a virtual machine costs more than the
// call's own work and adds to its tail latency. Forwards that come while
// a call is in flight wait for the loop, which sends them together.
type peerQueue struct {
	addr  string
	peers *Peers
	in    chan *fwdReq
	done  chan struct{} // closed when loop returns
	// retire stops the loop of a queue forgotten as idle (forget.go).
	retire chan struct{}
	// used is when a forward last took the queue; forwarder.mu guards it.
	used time.Time
	// slots holds a token for each Forward call in flight to the peer,
	// the loop's and the callers' own alike: forwardInFlight at most.
	slots chan struct{}
	// waiting counts forwards handed to the loop and not yet sent or
	// answered: a caller sends its own only when none waits.
	waiting atomic.Int64
	// freed wakes the loop when a caller's own call gives its slot back.
	freed chan struct{}
}

// takeIdle takes a call slot for a caller to send its own forward, when
// nothing waits for the loop and a slot is free.
func (q *peerQueue) takeIdle() bool {
	if q.waiting.Load() > 0 {
		return false
	}
	select {
	case <-q.peers.closed:
		return false // the loop answers it: not sent
	default:
	}
	return q.take()
}

// take takes a call slot, if one is free.
func (q *peerQueue) take() bool {
	select {
	case q.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// giveBack returns a caller's call slot and wakes the loop, which may
// have forwards waiting for it (unless a wakeup is pending already).
func (q *peerQueue) giveBack() {
	<-q.slots
	select {
	case q.freed <- struct{}{}:
	default:
	}
}

func (q *peerQueue) loop() {
	defer close(q.done)
	var queue []*fwdReq
	var lg linger.Policy
	inflight := 0                                 // the loop's own calls
	sent := make(chan time.Time, forwardInFlight) // when each call went out
	for {
		if len(queue) > 0 && q.take() {
			if inflight == 0 {
				queue = linger.Gather(&lg, queue, forwardChecks, q.in, q.peers.closed) // refused below when closed
			}
			if queue = q.dropWithdrawn(queue); len(queue) == 0 {
				<-q.slots
				continue
			}
			n, size, queued := 0, 0, linger.Total(queue, forwardChecks)
			for n < len(queue) && (n == 0 || size+len(queue[n].checks) <= forwardMaxChecks) {
				size += len(queue[n].checks)
				n++
			}
			batch := queue[:n:n]
			queue = queue[n:]
			q.waiting.Add(-int64(n))
			inflight++
			start := time.Now()
			lg.Sent(size, queued, start)
			go func() {
				q.send(batch)
				<-q.slots
				sent <- start
			}()
			continue
		}
		select {
		case r := <-q.in:
			queue = append(queue, r)
		case start := <-sent:
			inflight--
			lg.Answered(start, time.Now())
		case <-q.freed:
		case <-q.retire: // forgotten while idle (forget.go): normally nothing to answer
			q.stop(queue, inflight, sent)
			return
		case <-q.peers.closed:
			q.stop(queue, inflight, sent)
			return
		}
	}
}

// stop ends the loop: forwards queued are answered "not sent", and calls
// in flight are waited for (they answer their own).
func (q *peerQueue) stop(queue []*fwdReq, inflight int, sent <-chan time.Time) {
	notSent := func(r *fwdReq) {
		q.waiting.Add(-1)
		if r.claim() {
			r.err = fmt.Errorf("forward to %s: %w", q.addr, errNotSent)
			close(r.done)
		}
	}
	for _, r := range queue {
		notSent(r)
	}
	for ; inflight > 0; inflight-- {
		<-sent
	}
	for {
		select {
		case r := <-q.in:
			notSent(r)
		default:
			return
		}
	}
}

// dropWithdrawn takes out of queue the requests their callers withdrew
// (await), so that a call is not cut short by checks it will not carry.
func (q *peerQueue) dropWithdrawn(queue []*fwdReq) []*fwdReq {
	n := len(queue)
	queue = slices.DeleteFunc(queue, func(r *fwdReq) bool { return r.state.Load() == reqWithdrawn })
	q.waiting.Add(-int64(n - len(queue)))
	return queue
}

// forwardChecks is a forward's size for linger.
func forwardChecks(r *fwdReq) int { return len(r.checks) }

// send makes one Forward call for batch and answers each request.
func (q *peerQueue) send(batch []*fwdReq) {
	// A caller that gave up while queued withdrew its request and was
	// told it was not sent; one whose deadline passed as the queue
	// claimed it is answered so here: sending its checks now would only
	// count what nobody waits for.
	live := batch[:0]
	for _, r := range batch {
		if !r.claim() {
			continue // withdrawn by its caller, who answered it
		}
		if err := r.ctx.Err(); err != nil {
			r.err = fmt.Errorf("forward to %s: %w: %w", q.addr, errNotSent, err)
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if batch = live; len(batch) == 0 {
		return
	}
	fail := func(err error) {
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
	}
	conn := q.peers.conn(q.addr)
	if !waitReady(conn.GetState, conn.Connect, conn.WaitForStateChange) {
		fail(fmt.Errorf("forward to %s: %w", q.addr, errNotSent))
		return
	}
	freq := &peerv1.ForwardRequest{}
	defer func() {
		metrics.ForwardedChecks.Add(float64(len(freq.Checks)))
		metrics.ForwardBatchSize.Observe(float64(len(freq.Checks)))
	}()
	encoded := map[*policy.Policy][]byte{} // checks of a batch mostly share policies
	now := time.Now()
	for _, r := range batch {
		wait := waitMs(r.ctx, now)
		for _, c := range r.checks {
			b, ok := encoded[c.Policy]
			if !ok {
				b = c.Policy.AppendBinary(nil)
				encoded[c.Policy] = b
			}
			freq.Checks = append(freq.Checks, &peerv1.ForwardCheck{Shard: uint32(r.shard), Key: c.Key, Policy: b, Cost: c.Cost, Joined: c.Joined, WaitMs: wait})
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), callDeadline(batch))
	defer cancel()
	ctx, span := forwardSpan(ctx, q.addr, batch, len(freq.Checks))
	defer span.End()
	var p peer.Peer
	resp, err := peerv1.NewPeerClient(conn).Forward(ctx, freq, grpc.Peer(&p))
	if sent.Never(err, &p) {
		// The connection broke after waitReady saw it up, before the
		// call had it: nothing left this node.
		fail(fmt.Errorf("forward to %s: %w: %w", q.addr, errNotSent, err))
		return
	}
	if err == nil && len(resp.Results) != len(freq.Checks) {
		err = fmt.Errorf("peer %s answered %d of %d checks", q.addr, len(resp.Results), len(freq.Checks))
	}
	if err != nil {
		// The call may have reached the peer: its outcome is unknown.
		fail(fmt.Errorf("forward to %s: %w: %w", q.addr, cluster.ErrUnavailable, peerRefusal(q.addr, err)))
		return
	}
	results := resp.Results
	for _, r := range batch {
		mine := results[:len(r.checks)]
		results = results[len(r.checks):]
		r.results, r.err = decodeResults(r.shard, mine)
		close(r.done)
	}
}

// waitReady makes sure a peer connection is up before a forward is sent:
// a call on a broken connection might or might not arrive, so it is better
// not made at all. A connection whose last attempt failed (the peer is
// down: killed, restarting, partitioned) fails at once rather than after
// connectWait: the check goes back to onLeader, which routes it again as
// soon as this node learns the group's new leader, and a leader failover
// costs its election, not the election plus a wait per attempt on the dead
// node (Peers reconnects within deadconn.MaxRedialDelay once the peer is back).
func waitReady(state func() connectivity.State, connect func(), wait func(context.Context, connectivity.State) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), connectWait)
	defer cancel()
	for {
		s := state()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.Idle:
			connect()
		case connectivity.Shutdown, connectivity.TransientFailure:
			return false
		}
		if !wait(ctx, s) {
			return false
		}
	}
}

// callDeadline is when a Forward call carrying batch gives up: when the
// last of its callers does, and never later than forwardTimeout. A peer
// that stalls (paused, partitioned) then holds a call slot no longer than
// its callers wait.
func callDeadline(batch []*fwdReq) time.Time {
	limit := time.Now().Add(forwardTimeout)
	var latest time.Time
	for _, r := range batch {
		d, ok := r.ctx.Deadline()
		if !ok {
			return limit
		}
		if d.After(latest) {
			latest = d
		}
	}
	if latest.After(limit) {
		return limit
	}
	return latest
}

// decodeResults turns one shard's forward results into results or the
// shard's error. Checks the peer refused as invalid, whose slot moved,
// that its full or backlogged group refused, or whose outcome is unknown
// fail alone: the error is then a *cluster.PartialError carrying each
// check's answer.
func decodeResults(shard int, rs []*peerv1.ForwardResult) ([]policy.Result, error) {
	out := make([]policy.Result, len(rs))
	var errs []error
	for i, r := range rs {
		switch r.Code {
		case peerv1.ForwardResult_OK:
			out[i] = decisionFromProto(r.Decision)
		case peerv1.ForwardResult_INVALID:
			if errs == nil {
				errs = make([]error, len(rs))
			}
			errs[i] = fmt.Errorf("%w: refused by the shard leader: %s", ErrInvalid, relayedField(r.Message))
		case peerv1.ForwardResult_MOVED:
			if errs == nil {
				errs = make([]error, len(rs))
			}
			errs[i] = fmt.Errorf("%w: %s", cluster.ErrMoved, r.Message)
		case peerv1.ForwardResult_FULL:
			if errs == nil {
				errs = make([]error, len(rs))
			}
			errs[i] = fmt.Errorf("%w: refused by the shard leader: %s", cluster.ErrFull, r.Message)
		case peerv1.ForwardResult_BACKLOG:
			if errs == nil {
				errs = make([]error, len(rs))
			}
			errs[i] = backlogged(r.Message)
		case peerv1.ForwardResult_NOT_LEADER:
			// A check the peer refused alone (checkItem) while others of
			// the request counted, or may have (written, then the
			// leadership lost): the request must not go again whole, which
			// would count those twice.
			if slices.ContainsFunc(rs, mayHaveCounted) {
				if errs == nil {
					errs = make([]error, len(rs))
				}
				errs[i] = fmt.Errorf("%w: %s", cluster.ErrNoLeader, r.Message)
				continue
			}
			return nil, &cluster.NotLeaderError{Group: fmt.Sprintf("shard-%d", shard), LeaderID: r.LeaderId, LeaderAddr: r.LeaderAddr}
		default:
			// Written, its outcome unknown: that check's answer alone, so
			// that the others keep theirs (a leader handing over between
			// two checks answers those it decided, and refuses the rest
			// unwritten, to be routed again).
			if errs == nil {
				errs = make([]error, len(rs))
			}
			errs[i] = fmt.Errorf("%w: %s", cluster.ErrUnavailable, r.Message)
		}
	}
	if errs == nil {
		return out, nil
	}
	return nil, cluster.NewPartialError(out, errs)
}

// backlogged is a forwarded check the leader's group refused, unwritten,
// behind its backlog (BACKLOG: cluster.ErrBacklog), with the leader's
// message, which names the group and the times.
type backlogged string

func (e backlogged) Error() string { return string(e) }

// Is makes a backlogged check errors.Is cluster.ErrBacklog.
func (e backlogged) Is(target error) bool { return target == cluster.ErrBacklog }

// mayHaveCounted reports whether a forwarded check's answer leaves open
// that it counted: answered, or failed after it reached the log (every
// code but those of a check refused before it was written).
func mayHaveCounted(r *peerv1.ForwardResult) bool {
	switch r.Code {
	case peerv1.ForwardResult_NOT_LEADER, peerv1.ForwardResult_INVALID, peerv1.ForwardResult_MOVED, peerv1.ForwardResult_FULL,
		peerv1.ForwardResult_BACKLOG:
		return false
	}
	return true
}
