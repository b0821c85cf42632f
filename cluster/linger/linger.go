package linger

import "time"

const (
	// MinBatch is the smallest last batch that makes a group wait: below
	// it the load is light and a lone check goes out at once.
	MinBatch = 4
	// share is the part of the checks in circulation a batch waits for:
	// not all, since callers drift to other groups and some never come.
	share = 0.8
	// decay is how fast the estimate of the checks in circulation falls
	// when the load does, per batch.
	decay = 0.9
	// MaxWait bounds any wait, whatever the last batch took.
	MaxWait = 10 * time.Millisecond
)

// Policy is one group commit's linger. Its zero value never waits until
// it has seen batches. It is not safe for concurrent use: the batcher's
// loop owns it.
type Policy struct {
	demand   float64       // decaying maximum of the checks in circulation
	last     int           // checks of the last batch sent
	took     time.Duration // how long the last answered batch took
	answered time.Time     // when it was answered
}

// Wait says, with queued checks ready and no batch in flight, how many
// checks the next batch should hold and until when to wait for them. A
// zero deadline (or one already past) means send now.
func (p *Policy) Wait(queued int) (target int, until time.Time) {
	if p.last < MinBatch || p.answered.IsZero() {
		return queued, time.Time{}
	}
	target = int(p.demand * share)
	if queued >= target {
		return queued, time.Time{}
	}
	return target, p.answered.Add(min(p.took, MaxWait))
}

// Sent records a batch of n checks leaving, with queued checks (those it
// carries included) that were waiting when it left.
func (p *Policy) Sent(n, queued int, now time.Time) {
	// What is queued now, and the checks of the last batch that were
	// answered and are coming back, are in circulation.
	seen := float64(queued)
	if !p.answered.IsZero() && now.Sub(p.answered) <= max(p.took, time.Millisecond) {
		seen += float64(p.last)
	}
	p.demand = max(seen, p.demand*decay)
	p.last = n
}

// Answered records that the batch sent at sent was answered at now.
func (p *Policy) Answered(sent, now time.Time) {
	p.took, p.answered = now.Sub(sent), now
}

// Gather grows queue, as p says, with what arrives on in: until the checks
// queued (size of each item) reach the target, the wait ends, or stop
// closes. Batchers call it with no batch in flight, before sending.
func Gather[T any](p *Policy, queue []T, size func(T) int, in <-chan T, stop <-chan struct{}) []T {
	queued := Total(queue, size)
	target, until := p.Wait(queued)
	wait := time.Until(until)
	if queued >= target || wait <= 0 {
		return queue
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for queued < target {
		select {
		case r := <-in:
			queue = append(queue, r)
			queued += size(r)
		case <-t.C:
			return queue
		case <-stop:
			return queue
		}
	}
	return queue
}

// Total is the checks in queue, size giving each item's.
func Total[T any](queue []T, size func(T) int) int {
	n := 0
	for _, r := range queue {
		n += size(r)
	}
	return n
}
