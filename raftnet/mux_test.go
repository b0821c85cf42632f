package raftnet

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testMux shares a listener between a raftnet layer and one
// NetworkTransport layer as the node's Raft port mux does: a connection
// starts with a byte naming its layer. A mux without the raftnet layer
// (an older release) closes the connections meant for it.
type testMux struct {
	ln     net.Listener
	layers map[byte]*testLayer
}

const (
	muxRaftnet byte = 1
	muxLegacy  byte = 2
)

func newTestMux(t testing.TB, withRaftnet bool) *testMux {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &testMux{ln: ln, layers: map[byte]*testLayer{muxLegacy: newTestLayer(ln.Addr(), muxLegacy)}}
	if withRaftnet {
		m.layers[muxRaftnet] = newTestLayer(ln.Addr(), muxRaftnet)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				var b [1]byte
				if _, err := io.ReadFull(c, b[:]); err != nil {
					c.Close()
					return
				}
				l := m.layers[b[0]]
				if l == nil {
					c.Close() // an older node: no such layer
					return
				}
				select {
				case l.conns <- c:
				case <-l.done:
					c.Close()
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return m
}

// testLayer is one layer of a testMux.
type testLayer struct {
	addr  net.Addr
	tag   byte
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newTestLayer(addr net.Addr, tag byte) *testLayer {
	return &testLayer{addr: addr, tag: tag, conns: make(chan net.Conn, 16), done: make(chan struct{})}
}

func (l *testLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{l.tag}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (l *testLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *testLayer) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *testLayer) Addr() net.Addr { return l.addr }
