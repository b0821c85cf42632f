package raftnet

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxKeptBuffer is the largest write buffer a link keeps between writes.
const maxKeptBuffer = 1 << 20

// writer writes a connection's frames. The caller that finds nobody
// writing writes itself, at once, without waking another goroutine;
// callers that come while it writes append their frames and return: the
// frames of every group that arrive during a write leave together in the
// next system call. That one is not the caller's: it leaves once its own
// frame is out, and a goroutine of the writer's writes what came
// meanwhile (drain), for as long as frames keep coming.
type writer struct {
	conn    net.Conn
	timeout time.Duration

	// For the link's silence rule: a write that takes long is the link
	// pushing a big frame through a slow network, not the peer gone quiet.
	started  atomic.Int64 // unix nanos the write under way began, 0 if none
	longDone atomic.Int64 // unix nanos the last write over longWrite ended

	mu      sync.Mutex
	pending []byte
	spare   []byte
	writing bool
	err     error // the first write error: the connection is done
}

// longWrite is how long a write must take to count as pushing a big frame
// (writer.longDone): a live link's writes of heartbeats and entries
// return at once, into the socket's buffer.
const longWrite = 100 * time.Millisecond

// busySince reports since when, as unix nanos, the link has been pushing
// frames out without pause: the start of a write under way that has
// taken longWrite already, or the end of the last long one; 0 if neither.
func (w *writer) busySince(now time.Time) int64 {
	if s := w.started.Load(); s != 0 && now.Sub(time.Unix(0, s)) > longWrite {
		return now.UnixNano()
	}
	return w.longDone.Load()
}

func newWriter(conn net.Conn, timeout time.Duration) *writer {
	return &writer{conn: conn, timeout: timeout}
}

// add appends a frame with fill, which appends it to the buffer it is
// given, and sends it (or leaves it to the one writing now). It returns
// fill's error or the connection's.
func (w *writer) add(fill func([]byte) ([]byte, error)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	var err error
	if w.pending, err = fill(w.pending); err != nil || w.writing {
		return err
	}
	w.writing = true
	w.writeOut()
	if len(w.pending) > 0 && w.err == nil {
		// Frames came during the write. Writing them here would hold this
		// caller (a group's call, with its own answer to wait for) for as
		// long as the other groups keep the connection busy.
		go w.drain()
		return nil
	}
	w.writing = false
	return w.err
}

// drain writes the pending frames until there are none, for add.
func (w *writer) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.pending) > 0 && w.err == nil {
		w.writeOut()
	}
	w.writing = false
}

// writeOut writes the pending frames in one call; w.mu is held on entry
// and on return, not during the write.
func (w *writer) writeOut() {
	// out is written while others append to the spare buffer; spare is
	// nil until the write is over, so the two never share memory.
	out := w.pending
	w.pending, w.spare = w.spare[:0], nil
	w.mu.Unlock()
	if w.timeout > 0 {
		_ = w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	start := time.Now()
	w.started.Store(start.UnixNano())
	_, werr := w.conn.Write(out)
	w.started.Store(0)
	if end := time.Now(); end.Sub(start) > longWrite {
		w.longDone.Store(end.UnixNano())
	}
	if cap(out) > maxKeptBuffer {
		out = nil
	}
	w.mu.Lock()
	if werr != nil && w.err == nil {
		w.err = werr
		w.conn.Close() // the reader sees it and fails the calls
	}
	if w.err == nil {
		w.spare = out[:0]
	} else {
		w.pending = nil // a failed writer writes nothing more: keep no buffer
	}
}

// close marks the writer failed with err: later adds return it.
func (w *writer) close(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	w.pending, w.spare = nil, nil // unless a write is under way: writeOut drops its own
}

// isReset reports a connection the peer closed hard.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
