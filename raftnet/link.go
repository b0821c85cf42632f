package raftnet

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// readBuffer is a link's read buffer: many small frames per system call.
const readBuffer = 64 << 10

// errTimeout fails a call its peer did not answer within the timeout.
var errTimeout = errors.New("raftnet: no answer within the timeout")

// link is this node's connection to one peer, carrying the calls of all
// its groups; answers come back on it, matched by call id.
type link struct {
	addr    raft.ServerAddress
	conn    net.Conn
	w       *writer
	timeout time.Duration
	silence time.Duration // Config.Silence

	mu      sync.Mutex
	pending map[uint64]*call
	nextID  uint64
	err     error // set when the link failed; every pending call failed with it

	lastRecv atomic.Int64  // unix nanos of the last frame read
	done     chan struct{} // closed when the reader has stopped
}

// call is one request waiting for its answer.
type call struct {
	resp any
	sent time.Time
	// done is called once, with the answer decoded into resp or the
	// call's error, from the link's reader or its failure; it must not
	// block.
	done func(error)
}

func newLink(addr raft.ServerAddress, conn net.Conn, timeout, silence time.Duration) *link {
	l := &link{addr: addr, conn: conn, w: newWriter(conn, timeout), timeout: timeout, silence: silence,
		pending: map[uint64]*call{}, done: make(chan struct{})}
	l.lastRecv.Store(time.Now().UnixNano())
	go l.read()
	return l
}

// alive reports whether the link can still take calls.
func (l *link) alive() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == nil
}

// call sends cmd of group. When it returns nil, done will be called once;
// an error means the call was not sent and done is never called.
func (l *link) call(group string, cmd, resp any, done func(error)) error {
	c := &call{resp: resp, sent: time.Now(), done: done}
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return err
	}
	id := l.nextID
	l.nextID++
	l.pending[id] = c
	l.mu.Unlock()
	err := l.w.add(func(b []byte) ([]byte, error) {
		b, _, err := appendRequest(b, id, group, cmd)
		return b, err
	})
	if err == nil {
		return nil
	}
	l.mu.Lock()
	_, mine := l.pending[id]
	delete(l.pending, id)
	l.mu.Unlock()
	if !mine {
		return nil // the link failed meanwhile and answered it
	}
	return err
}

// take removes and returns the pending call id.
func (l *link) take(id uint64) *call {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.pending[id]
	delete(l.pending, id)
	return c
}

func (l *link) read() {
	defer close(l.done)
	r := bufio.NewReaderSize(l.conn, readBuffer)
	var buf []byte
	for {
		f, b, err := readFrame(r, buf)
		buf = b
		if err != nil {
			l.fail(fmt.Errorf("raftnet: link to %s: %w", l.addr, err))
			return
		}
		if f.kind == kindRequest {
			// Before take: the call its id names stays pending, so fail
			// answers it with the others.
			l.fail(fmt.Errorf("raftnet: link to %s: a request on an outbound link", l.addr))
			return
		}
		l.lastRecv.Store(time.Now().UnixNano())
		c := l.take(f.id)
		switch {
		case c == nil: // timed out already
		case f.kind == kindError:
			c.done(errors.New(string(f.body)))
		default:
			c.done(decodeResponse(f.body, c.resp))
		}
	}
}

// fail closes the link and fails every pending call with err.
func (l *link) fail(err error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	l.conn.Close()
	l.w.close(err)
	for _, c := range inOrder(pending) {
		c.done(err)
	}
}

// expire fails the calls sent before now-timeout, and the whole link when
// one of them waited the silence with nothing at all coming back
// meanwhile: the peer is gone (a partition, a paused process) and its
// connection will not say so.
func (l *link) expire(now time.Time) {
	if l.timeout <= 0 {
		return
	}
	cutoff, quiet := now.Add(-l.timeout), now.Add(-l.silence)
	l.mu.Lock()
	var late map[uint64]*call
	waited := false // a call waited the silence
	for id, c := range l.pending {
		waited = waited || c.sent.Before(quiet)
		if c.sent.Before(cutoff) {
			if late == nil {
				late = map[uint64]*call{}
			}
			late[id] = c
			delete(l.pending, id)
		}
	}
	l.mu.Unlock()
	for _, c := range inOrder(late) {
		c.done(fmt.Errorf("%w (%s, link to %s)", errTimeout, l.timeout, l.addr))
	}
	// Silent only if a call waited the silence and nothing came back
	// meanwhile (an idle link's old lastRecv says nothing about a call
	// sent a moment ago), nor was a big frame being pushed through a slow
	// network: the answers wait behind it (writer.busySince).
	heard := max(l.lastRecv.Load(), l.w.busySince(now))
	if waited && time.Unix(0, heard).Before(quiet) {
		l.fail(fmt.Errorf("%w: nothing from %s for %s", errTimeout, l.addr, l.silence))
	}
}

// close ends the link; its pending calls fail.
func (l *link) close() {
	l.fail(raft.ErrTransportShutdown)
	<-l.done
}

// inOrder returns the calls of m by id, the order they were sent in: a
// pipeline's futures must fail in that order.
func inOrder(m map[uint64]*call) []*call {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*call, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}
