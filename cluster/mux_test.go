package cluster

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener is an in-memory net.Listener: Dial hands it one end of a
// net.Pipe, so a Mux runs inside a synctest bubble (pipes, deadlines and
// all) on fake time.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// dial connects to the mux and writes header (nothing when nil).
func (l *pipeListener) dial(t *testing.T, header []byte) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	l.conns <- server
	if header != nil {
		go client.Write(header) // a pipe write waits for the reader
	}
	return client
}

func muxHeader(group string) []byte { return append([]byte{muxMagic, byte(len(group))}, group...) }

// closedByMux reports, once every goroutine is idle, whether the mux has
// closed its end of c (a read fails) rather than kept it open.
func closedByMux(t *testing.T, c net.Conn) bool {
	t.Helper()
	res := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		res <- err
	}()
	synctest.Wait()
	select {
	case err := <-res:
		return err != nil
	default:
		c.Close() // unblocks the reader
		<-res
		return false
	}
}

func newTestMux(t *testing.T) (*Mux, *pipeListener) {
	ln := newPipeListener()
	return NewMux(ln, nil, nil, slog.New(slog.DiscardHandler), false), ln
}

// acceptOne accepts on layer in the background.
func acceptOne(l interface{ Accept() (net.Conn, error) }) chan net.Conn {
	out := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(out)
			return
		}
		out <- c
	}()
	return out
}

// Each connection reaches the layer its header names, with the bytes
// after the header intact, and no other layer.
func TestMuxRoutesByHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, ln := newTestMux(t)
		defer m.Close()
		meta, err := m.Layer("meta")
		if err != nil {
			t.Fatal(err)
		}
		shard, err := m.Layer("shard-7")
		if err != nil {
			t.Fatal(err)
		}
		metaIn, shardIn := acceptOne(meta), acceptOne(shard)
		c := ln.dial(t, append(muxHeader("shard-7"), "hello"...))
		synctest.Wait()
		if len(metaIn) != 0 {
			t.Fatal("the meta layer got a connection for shard-7")
		}
		got := <-shardIn
		buf := make([]byte, 5)
		if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read %q, %v after the header", buf, err)
		}
		c.Close()
		ln.dial(t, muxHeader("meta"))
		if got := <-metaIn; got == nil {
			t.Fatal("meta layer accepted nothing")
		}
	})
}

// Connections for a group not open here, and connections that do not
// start with the mux's magic, are closed at once.
func TestMuxClosesUnknownGroupsAndGarbage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, ln := newTestMux(t)
		defer m.Close()
		l, err := m.Layer("meta")
		if err != nil {
			t.Fatal(err)
		}
		in := acceptOne(l)
		for name, hdr := range map[string][]byte{
			"unknown group": muxHeader("shard-3"),
			"longer name":   muxHeader("meta-2"),
			"bad magic":     append([]byte{'G', 4}, "meta"...),
		} {
			if c := ln.dial(t, hdr); !closedByMux(t, c) {
				t.Errorf("%s: connection left open", name)
			}
		}
		if len(in) != 0 {
			t.Fatal("a bad header reached the layer")
		}
	})
}

// A held mux closes every inbound connection, whatever its header, and
// counts it; once admitted it routes them as before.
func TestMuxHeldUntilAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		m := NewMux(ln, nil, nil, slog.New(slog.DiscardHandler), true)
		defer m.Close()
		l, err := m.Layer("meta")
		if err != nil {
			t.Fatal(err)
		}
		in := acceptOne(l)
		for range 3 {
			if c := ln.dial(t, muxHeader("meta")); !closedByMux(t, c) {
				t.Fatal("a held mux left a connection open")
			}
		}
		if len(in) != 0 || !m.Held() || m.Refused() != 3 {
			t.Fatalf("held: %d routed, Held %v, Refused %d; want 0, true, 3", len(in), m.Held(), m.Refused())
		}
		m.Admit()
		ln.dial(t, muxHeader("meta"))
		if got := <-in; got == nil || m.Held() || m.Refused() != 3 {
			t.Fatalf("admitted: routed %v, Held %v, Refused %d", got != nil, m.Held(), m.Refused())
		}
	})
}

// A peer that sends no header, or half of one, is dropped after
// muxHeaderTimeout, and meanwhile other connections are routed at once.
func TestMuxDropsSlowHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, ln := newTestMux(t)
		defer m.Close()
		l, err := m.Layer("meta")
		if err != nil {
			t.Fatal(err)
		}
		silent := ln.dial(t, nil)
		half := ln.dial(t, []byte{muxMagic, 4, 'm'})
		in := acceptOne(l)
		ln.dial(t, muxHeader("meta"))
		synctest.Wait()
		if len(in) != 1 {
			t.Fatal("a slow peer held up another connection")
		}
		time.Sleep(muxHeaderTimeout - time.Millisecond)
		synctest.Wait()
		silentDone, halfDone := readFails(silent), readFails(half)
		synctest.Wait()
		if len(silentDone)+len(halfDone) != 0 {
			t.Fatal("connections dropped before the header timeout")
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if len(silentDone) != 1 || len(halfDone) != 1 {
			t.Fatal("connections without a whole header kept past the timeout")
		}
	})
}

// readFails reads c in the background; the channel gets a value when the
// read fails.
func readFails(c net.Conn) chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		if _, err := c.Read(make([]byte, 1)); err != nil {
			out <- struct{}{}
		}
	}()
	return out
}

// A group name is registered once at a time; closing the layer frees it,
// and its Accept returns.
func TestMuxLayerRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, ln := newTestMux(t)
		defer m.Close()
		l, err := m.Layer("meta")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Layer("meta"); err == nil {
			t.Fatal("a group registered twice")
		}
		for _, bad := range []string{"", string(make([]byte, 256))} {
			if _, err := m.Layer(bad); err == nil {
				t.Fatalf("group name of %d bytes accepted", len(bad))
			}
		}
		in := acceptOne(l)
		l.Close()
		if c, ok := <-in; ok || c != nil {
			t.Fatal("accept on a closed layer returned a connection")
		}
		// Connections for the closed group are refused until it is
		// registered again.
		if c := ln.dial(t, muxHeader("meta")); !closedByMux(t, c) {
			t.Fatal("connection for a closed layer left open")
		}
		again, err := m.Layer("meta")
		if err != nil {
			t.Fatalf("registering a closed group again: %v", err)
		}
		in = acceptOne(again)
		ln.dial(t, muxHeader("meta"))
		if c := <-in; c == nil {
			t.Fatal("the group registered again accepts nothing")
		}
	})
}

// Closing the mux while layers accept: their Accept returns
// net.ErrClosed, connections waiting for them are closed, the listener
// is closed and Close returns once the accept loop has stopped.
func TestMuxCloseWhileAccepting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, ln := newTestMux(t)
		meta, err := m.Layer("meta")
		if err != nil {
			t.Fatal(err)
		}
		shard, err := m.Layer("shard-1")
		if err != nil {
			t.Fatal(err)
		}
		waiting := ln.dial(t, muxHeader("shard-1")) // routed, never accepted
		synctest.Wait()
		errs := make(chan error, 1)
		go func() {
			_, err := meta.Accept()
			errs <- err
		}()
		synctest.Wait()
		if err := m.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if err := <-errs; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept after close: %v", err)
		}
		if _, err := shard.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept on another layer after close: %v", err)
		}
		if !closedByMux(t, waiting) {
			t.Fatal("a connection queued for a layer survived Close")
		}
		select {
		case <-ln.done:
		default:
			t.Fatal("listener left open")
		}
		if _, err := m.Layer("new"); err == nil {
			t.Fatal("a layer registered on a closed mux")
		}
	})
}

// A group that does not accept fast enough has its backlog capped: the
// connection beyond muxBacklog is closed, the queued ones are kept.
func TestMuxBacklogIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, ln := newTestMux(t)
		defer m.Close()
		l, err := m.Layer("meta")
		if err != nil {
			t.Fatal(err)
		}
		for range muxBacklog {
			ln.dial(t, muxHeader("meta"))
		}
		synctest.Wait()
		if c := ln.dial(t, muxHeader("meta")); !closedByMux(t, c) {
			t.Fatal("connection beyond the backlog kept")
		}
		for range muxBacklog {
			if _, err := l.Accept(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
