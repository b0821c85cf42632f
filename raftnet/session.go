package raftnet

import (
	"sync"

	"github.com/hashicorp/raft"
)

// session is one group's calls on one inbound link. Raft's main loop takes
// a group's RPCs one at a time and answers each before it takes the next,
// so the calls go to raft in the order they came and their answers come
// back, in that order, on one channel. The link's reader hands a call to
// raft itself when raft is free and nothing waits before it; otherwise
// the session's goroutine does, so a busy group (a slow disk write) never
// holds up the reader and the other groups' calls behind it.
type session struct {
	t       *Transport
	w       *writer
	answers chan raft.RPCResponse

	mu      sync.Mutex
	waiting []uint64  // ids raft took, oldest first, not answered yet (roomLocked)
	queued  []request // calls raft has not taken yet, in order
	kick    chan struct{}
	stop    chan struct{}
	once    sync.Once
	done    chan struct{}
}

// request is one call waiting for its group.
type request struct {
	id  uint64
	cmd any
}

func newSession(t *Transport, w *writer) *session {
	s := &session{t: t, w: w, answers: make(chan raft.RPCResponse, 16),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// submit hands cmd to raft, or queues it behind the calls that wait.
func (s *session) submit(id uint64, cmd any) {
	s.mu.Lock()
	if len(s.queued) == 0 && s.roomLocked() {
		select {
		case s.t.consumer <- raft.RPC{Command: cmd, RespChan: s.answers}:
			s.waiting = append(s.waiting, id)
			s.mu.Unlock()
			return
		default:
		}
	}
	s.queued = append(s.queued, request{id: id, cmd: cmd})
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// roomLocked reports whether raft may take one more call: raft answers by
// a send on s.answers, and blocks while it is full, so raft never holds
// more calls, taken or answered and not yet written, than it has room for
// (the session may be waiting to write to a peer that does not read).
// s.mu is held.
func (s *session) roomLocked() bool { return len(s.waiting) < cap(s.answers) }

func (s *session) run() {
	defer close(s.done)
	for {
		var to chan<- raft.RPC
		var next raft.RPC
		s.mu.Lock()
		if len(s.queued) > 0 && s.roomLocked() {
			to, next = s.t.consumer, raft.RPC{Command: s.queued[0].cmd, RespChan: s.answers}
		}
		s.mu.Unlock()
		select {
		case to <- next:
			s.mu.Lock()
			s.waiting = append(s.waiting, s.queued[0].id)
			s.queued[0] = request{}
			s.queued = s.queued[1:]
			s.mu.Unlock()
		case a := <-s.answers:
			s.mu.Lock()
			id := s.waiting[0]
			s.waiting = s.waiting[1:]
			s.mu.Unlock()
			_ = s.w.add(func(b []byte) ([]byte, error) { return appendResponse(b, id, a.Response, a.Error), nil })
		case <-s.kick:
		case <-s.t.closed:
			s.shutdown()
			return
		case <-s.stop:
			return
		}
	}
}

// shutdown answers every call of a group that closed.
func (s *session) shutdown() {
	s.mu.Lock()
	ids := s.waiting
	for _, r := range s.queued {
		ids = append(ids, r.id)
	}
	s.waiting, s.queued = nil, nil
	s.mu.Unlock()
	for _, id := range ids {
		_ = s.w.add(func(b []byte) ([]byte, error) {
			return appendResponse(b, id, nil, raft.ErrTransportShutdown), nil
		})
	}
}

// close stops the session and answers the calls it still holds: when its
// group was closed and opened again, the sender hears at once instead of
// waiting out its timeout (on a link that closes, they die with it).
func (s *session) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	s.shutdown()
}
