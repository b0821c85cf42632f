package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// askTimeout bounds one question to the meta leader for its latest
// command, asked for every caller of CatchUpMeta waiting then: as long as
// the callers wait (a second), so that a question to a leader that died
// holds the callers behind it no longer than their own did.
const askTimeout = time.Second

// metaTargets shares the meta leader's answer to "what is your latest
// command?" between the callers of CatchUpMeta. Every check that names a
// policy this node does not know asks (it may have been set a moment ago
// through another node), and clients still sending a deleted policy's name
// made one call to the meta leader per check. A caller is only given an
// answer to a question asked after it came: one that comes while a
// question is out waits for the next, which every caller that came
// meanwhile shares. So at most one question is out at a time, and none
// misses a command committed before it asked.
type metaTargets struct {
	ask func(context.Context) (uint64, error)

	mu      sync.Mutex
	running *targetAsk // asked, not answered yet
	next    *targetAsk // asked once running is answered
}

// targetAsk is one question and its answer, once done is closed.
type targetAsk struct {
	done   chan struct{}
	target uint64
	err    error
}

// get returns the meta leader's latest command, asked after get was
// called, or ctx's error when it ends first.
func (m *metaTargets) get(ctx context.Context) (uint64, error) {
	m.mu.Lock()
	var a *targetAsk
	if m.running == nil {
		a = &targetAsk{done: make(chan struct{})}
		m.running = a
		go m.run(a)
	} else {
		if m.next == nil {
			m.next = &targetAsk{done: make(chan struct{})}
		}
		a = m.next
	}
	m.mu.Unlock()
	select {
	case <-a.done:
		return a.target, a.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run asks a, then the question queued behind it, until none is.
func (m *metaTargets) run(a *targetAsk) {
	for a != nil {
		ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
		a.target, a.err = m.ask(ctx)
		cancel()
		close(a.done)
		m.mu.Lock()
		a, m.running, m.next = m.next, m.next, nil
		m.mu.Unlock()
	}
}

// askMetaLeader asks the meta leader, when another node leads the meta
// group, for its latest command.
func (n *Node) askMetaLeader(ctx context.Context) (uint64, error) {
	meta := n.metaGroup()
	if meta == nil {
		return 0, ErrClosed
	}
	if meta.isLeader() {
		return meta.lastCommand(), nil
	}
	addr := n.addrOf(meta.leader())
	if addr == "" {
		return 0, fmt.Errorf("meta group: %w", ErrNoLeader)
	}
	info, err := n.peers.Progress(ctx, addr, metaGroup)
	if err != nil {
		return 0, err
	}
	if !info.Leader {
		return 0, fmt.Errorf("meta group: %w: %s no longer leads it", ErrNoLeader, addr)
	}
	return info.LastCommand, nil
}
