package raftnet

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// maxInFlight is how many AppendEntries one pipeline keeps unanswered or
// answered but not yet taken by raft, as NetworkTransport does.
const maxInFlight = 128

// pipeline sends a group's AppendEntries to one peer without waiting for
// each answer; answered futures come out of Consumer in the order they
// were sent, handed over by the goroutine that completes them (the link's
// reader), which never blocks: out holds every future alive.
type pipeline struct {
	l     *link
	group string
	out   chan raft.AppendFuture

	mu     sync.Mutex
	queue  []*future // sent and not yet handed to raft, in order
	closed bool
}

func newPipeline(l *link, group string) *pipeline {
	return &pipeline{l: l, group: group, out: make(chan raft.AppendFuture, maxInFlight)}
}

// room waits until one more future fits in out with every other alive one:
// those in flight and those answered that raft has not taken yet.
//
// It gives up after the link's timeout: raft's decoder stops taking answers
// after the first failed one, and its send loop may still call
// AppendEntries before it notices; it closes the pipeline only once that
// call returns.
func (p *pipeline) room() error {
	limit := p.l.timeout
	if limit <= 0 {
		limit = 10 * time.Second
	}
	deadline := time.Now().Add(limit)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		p.mu.Lock()
		closed, alive := p.closed, len(p.queue)+len(p.out)
		p.mu.Unlock()
		switch {
		case closed:
			return raft.ErrPipelineShutdown
		case alive < cap(p.out):
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("raftnet: pipeline to %s: %d answers not taken for %s", p.l.addr, alive, limit)
		}
		time.Sleep(wait) // raft is behind taking answers: rare
	}
}

// AppendEntries implements raft.AppendPipeline. Raft calls it from one
// goroutine, so sends are in order.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if err := p.room(); err != nil {
		return nil, err
	}
	fitEntries(args) // before the future keeps args: raft reads what was sent
	f := &future{start: time.Now(), args: args, resp: resp, done: make(chan struct{})}
	p.mu.Lock()
	p.queue = append(p.queue, f)
	p.mu.Unlock()
	err := p.l.call(p.group, args, resp, func(err error) { p.complete(f, err) })
	if err != nil {
		p.mu.Lock()
		if n := len(p.queue); n > 0 && p.queue[n-1] == f {
			p.queue = p.queue[:n-1]
		}
		p.mu.Unlock()
		return nil, err
	}
	return f, nil
}

// complete records f's answer and hands raft every answered future at the
// head of the queue.
func (p *pipeline) complete(f *future, err error) {
	f.err = err
	close(f.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) > 0 {
		head := p.queue[0]
		select {
		case <-head.done:
		default:
			return
		}
		p.queue[0] = nil
		p.queue = p.queue[1:]
		if !p.closed {
			p.out <- head // never blocks: room keeps every alive future within cap
		}
	}
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close implements raft.AppendPipeline: later sends fail; answers still on
// the way are dropped.
func (p *pipeline) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return nil
}

// future is one pipelined AppendEntries.
type future struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	done  chan struct{}
}

func (f *future) Error() error                          { <-f.done; return f.err }
func (f *future) Start() time.Time                      { return f.start }
func (f *future) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *future) Response() *raft.AppendEntriesResponse { return f.resp }
