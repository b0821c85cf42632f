package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/floodgate/floodgate/cluster/linger"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/metrics"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/tracing"
	"github.com/floodgate/floodgate/wallclock"
)

// batcher is a shard's group commit. Requests that arrive while earlier
// entries are being committed wait and then go out together as one log
// entry, so under load one Raft round trip and one disk flush serve many
// checks, while a lone request still goes out at once.
type batcher struct {
	group       string
	r           *raft.Raft
	maxBatch    int
	maxInFlight int
	timeout     time.Duration
	// notLeader builds the error for a request this replica cannot serve,
	// with a hint of the current leader.
	notLeader func() error
	// room says whether an elastic policy may stretch now; the leader
	// writes its answer into the entry so every replica applies the same.
	room func(*policy.Policy) bool

	in     chan *request
	stop   chan struct{}
	done   chan struct{}
	lastTS int64
	// clock stamps the entries (the node's guarded clock; nil: the
	// system clock).
	clock *wallclock.Guard
}

// request is one caller's checks, answered together.
type request struct {
	ctx     context.Context // the caller's: once it ends, unwritten checks are dropped
	checks  []fsm.Check
	results []policy.Result
	err     error
	done    chan struct{}
}

func newBatcher(group string, r *raft.Raft, cfg Config, clock *wallclock.Guard, notLeader func() error, room func(*policy.Policy) bool) *batcher {
	b := &batcher{
		clock:       clock,
		group:       group,
		r:           r,
		maxBatch:    cfg.MaxBatch,
		maxInFlight: cfg.MaxInFlight,
		timeout:     cfg.CommitTimeout,
		notLeader:   notLeader,
		room:        room,
		in:          make(chan *request, 1024),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	go b.loop()
	return b
}

// submit evaluates checks in the shard and returns one result per check.
// A NotLeaderError means nothing was written; ErrUnavailable means the
// outcome is unknown.
func (b *batcher) submit(ctx context.Context, checks []fsm.Check) ([]policy.Result, error) {
	res, _, err := b.submitReq(ctx, checks)
	return res, err
}

// submitReq is submit; when its caller gave up after the loop took the
// checks (the outcome unknown), it also returns their request, which is
// decided later or never: undecided waits for that.
func (b *batcher) submitReq(ctx context.Context, checks []fsm.Check) (res []policy.Result, undecidedReq *request, err error) {
	if b.r.State() != raft.Leader {
		return nil, nil, b.notLeader()
	}
	ctx, span := tracing.Start(ctx, "raft.commit", attribute.String("floodgate.group", b.group), attribute.Int("floodgate.checks", len(checks)))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	if err := ctx.Err(); err != nil {
		// Gone already: select below picks at random among ready cases.
		return nil, nil, fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	req := &request{ctx: ctx, checks: checks, done: make(chan struct{})}
	select {
	case b.in <- req:
	case <-b.stop:
		return nil, nil, b.notLeader()
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
	}
	select {
	case <-req.done:
		return req.results, nil, req.err
	case <-b.done:
		// The loop has stopped; it answers everything it took, so a request
		// still unanswered never reached the log.
		select {
		case <-req.done:
			return req.results, nil, req.err
		default:
			return nil, nil, b.notLeader()
		}
	case <-ctx.Done():
		return nil, req, fmt.Errorf("%s: %w: %w", b.group, ErrUnavailable, ctx.Err())
	}
}

// undecided waits until req, which its caller gave up on, is decided
// (applied or refused) or can no longer be (the loop stopped: it answers
// all it took).
func (b *batcher) undecided(req *request) {
	select {
	case <-req.done:
	case <-b.done:
	}
}

func (b *batcher) loop() {
	defer close(b.done)
	var queue []*request
	var lg linger.Policy
	inflight := 0
	committed := make(chan commitDone, b.maxInFlight)
	var commits commitTime // of the entries written (dropGone)
	for {
		if len(queue) > 0 && inflight < b.maxInFlight {
			if inflight == 0 {
				queue = linger.Gather(&lg, queue, requestChecks, b.in, b.stop) // the stop case below refuses them
			}
			if queue = dropGone(b.group, queue, time.Now(), commits.took(), b.maxBatch); len(queue) == 0 {
				continue
			}
			n, size, queued := 0, 0, linger.Total(queue, requestChecks)
			for n < len(queue) && (n == 0 || size+len(queue[n].checks) <= b.maxBatch) {
				size += len(queue[n].checks)
				n++
			}
			batch := queue[:n:n]
			queue = queue[n:]
			lg.Sent(size, queued, time.Now())
			b.apply(batch, committed)
			inflight++
			continue
		}
		select {
		case req := <-b.in:
			queue = append(queue, req)
		case c := <-committed:
			inflight--
			now := time.Now()
			lg.Answered(c.sent, now)
			if c.ok {
				commits.add(now.Sub(c.sent))
			}
		case <-b.stop:
			for _, req := range queue {
				req.err = b.notLeader()
				close(req.done)
			}
			for ; inflight > 0; inflight-- {
				<-committed
			}
			return
		}
	}
}

// dropGone answers the queued requests whose callers gave up as not
// written (they never reached Raft), and returns the others. Past its
// capacity a leader would otherwise write a backlog nobody waits for,
// counting checks nobody was told of against their limits, while every
// caller still there timed out behind it.
//
// Behind a backlog (more live checks queued than one entry takes), it
// also refuses, unwritten (ErrBacklog), those whose deadline is nearer
// than a commit takes (took, see commitTime): under a steady overload the
// queue grew until its oldest requests, sent first, had no time left, and
// every entry carried checks counted for callers gone by its commit
// (1,000 checks a second against a leader that writes 500: every caller
// after the first seconds told "outcome unknown", all of it counted).
// When every one is late, the one with the most time left is kept: it
// goes alone, and its commit tells how long a commit takes now (a disk
// fast again), so nothing is refused for good. Without a backlog every
// live request goes, whatever the estimate.
func dropGone(group string, queue []*request, now time.Time, took time.Duration, maxBatch int) []*request {
	keep := queue[:0]
	for _, req := range queue {
		if err := req.ctx.Err(); err != nil {
			req.err = fmt.Errorf("%w: %w", ErrNoLeader, err)
			close(req.done)
			continue
		}
		keep = append(keep, req)
	}
	clear(queue[len(keep):])
	if took == 0 || linger.Total(keep, requestChecks) <= maxBatch {
		return keep
	}
	left := func(req *request) time.Duration {
		if d, ok := req.ctx.Deadline(); ok {
			return d.Sub(now)
		}
		return took // no deadline: never late
	}
	probe := slices.MaxFunc(keep, func(a, b *request) int { return cmp.Compare(left(a), left(b)) })
	queue, keep = keep, keep[:0]
	for _, req := range queue {
		if l := left(req); l < took && req != probe {
			req.err = fmt.Errorf("%s: %w: its deadline is %v away, a commit takes %v", group, ErrBacklog, l.Round(time.Millisecond), took.Round(time.Millisecond))
			metrics.ChecksShed.WithLabelValues(metrics.ShedBacklog).Add(float64(len(req.checks)))
			close(req.done)
			continue
		}
		keep = append(keep, req)
	}
	clear(queue[len(keep):])
	return keep
}

// commitTime is how long a commit takes, for dropGone: the shorter of the
// last two entries written, so that one slow commit (a disk stall) does
// not refuse the callers that waited through it, with the disk fast again.
type commitTime struct{ last, prev time.Duration }

// add records a written entry's commit.
func (c *commitTime) add(d time.Duration) { c.prev, c.last = c.last, d }

// took is the estimate: 0 until two entries were written.
func (c *commitTime) took() time.Duration { return min(c.last, c.prev) }

// commitDone is a batch answered: when it was sent, and whether it was
// written (a failed one says nothing of how long a commit takes).
type commitDone struct {
	sent time.Time
	ok   bool
}

// requestChecks is a request's size for linger.
func requestChecks(r *request) int { return len(r.checks) }

// apply stamps the batch with the leader's clock, hands it to Raft and
// answers its requests from another goroutine once it commits. Stamping and
// enqueueing happen here, in order, so log order and time order agree.
func (b *batcher) apply(batch []*request, committed chan<- commitDone) {
	sent := time.Now()                  // times the commit, as its answer is timed
	ts := b.clock.From(sent).UnixNano() // stamps the entry
	if ts <= b.lastTS {
		ts = b.lastTS + 1
	}
	b.lastTS = ts
	var checks []fsm.Check
	if len(batch) == 1 {
		checks = batch[0].checks
	} else {
		for _, req := range batch {
			checks = append(checks, req.checks...)
		}
	}
	for i := range checks {
		if checks[i].Policy.Mode == policy.Elastic {
			checks[i].Elastic = b.room(checks[i].Policy)
		}
	}
	metrics.GroupCommitSize.Observe(float64(len(checks)))
	f := b.r.Apply(fsm.EncodeAllow(nil, ts, checks), b.timeout)
	go func() {
		var err error
		defer func() { committed <- commitDone{sent: sent, ok: err == nil} }()
		var results []policy.Result
		var notOwned []bool
		results, notOwned, err = b.wait(f)
		metrics.GroupCommitSeconds.Observe(time.Since(sent).Seconds())
		for _, req := range batch {
			n := len(req.checks)
			switch {
			case err != nil:
				req.err = err
			case notOwned != nil:
				req.results, req.err = movedItems(results[:n:n], notOwned[:n])
				results, notOwned = results[n:], notOwned[n:]
			default:
				req.results, results = results[:n:n], results[n:]
			}
			close(req.done)
		}
	}()
}

// classify turns a failed Apply into NotLeaderError or ErrNoLeader when
// the entry never reached the log (safe to retry elsewhere), or
// ErrUnavailable when its outcome is unknown.
func (b *batcher) classify(err error) error {
	switch {
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%s: %w: raft queue full", b.group, ErrNoLeader)
	case notAppended(err):
		return b.notLeader()
	}
	return fmt.Errorf("%s: %w: %w", b.group, ErrUnavailable, err)
}

// wait waits for f and classifies its failure. notOwned, when not nil,
// marks the checks the group refused at apply: their slot is not its own
// (any more, or yet), and nothing of them was counted.
func (b *batcher) wait(f raft.ApplyFuture) (results []policy.Result, notOwned []bool, err error) {
	if err := f.Error(); err != nil {
		return nil, nil, b.classify(err)
	}
	switch resp := f.Response().(type) {
	case []policy.Result:
		return resp, nil, nil
	case *fsm.AllowResults:
		return resp.Results, resp.NotOwned, nil
	case error:
		return nil, nil, fmt.Errorf("%s: %w", b.group, resp)
	default:
		return nil, nil, fmt.Errorf("%s: unexpected apply response %T", b.group, resp)
	}
}

// movedItems answers a request some of whose checks the group refused as
// not its own: those fail alone with ErrMoved (not counted, to be routed
// again), the others keep their results.
func movedItems(results []policy.Result, notOwned []bool) ([]policy.Result, error) {
	if !slices.Contains(notOwned, true) {
		return results, nil
	}
	errs := make([]error, len(results))
	for i, no := range notOwned {
		if no {
			errs[i] = fmt.Errorf("%w (refused at apply)", ErrMoved)
		}
	}
	return nil, NewPartialError(results, errs)
}

// close stops accepting requests; queued ones are refused as not-leader
// (nothing of them was written), in-flight ones finish.
func (b *batcher) close() {
	close(b.stop)
	<-b.done
}
