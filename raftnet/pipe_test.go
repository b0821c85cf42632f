package raftnet

import (
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// pipeNet is an in-memory network of raft.StreamLayers over net.Pipe: no
// sockets, so tests run in a synctest bubble on fake time, and an address
// can be listened on again the moment it was closed (a restarted peer).
type pipeNet struct {
	mu sync.Mutex
	ls map[string]*pipeLayer
}

func newPipeNet() *pipeNet { return &pipeNet{ls: map[string]*pipeLayer{}} }

// listen returns the layer accepting at addr, which must be free.
func (p *pipeNet) listen(addr string) *pipeLayer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ls[addr] != nil {
		panic(fmt.Sprintf("pipeNet: %s is taken", addr))
	}
	l := &pipeLayer{net: p, addr: pipeAddr(addr), conns: make(chan net.Conn), closed: make(chan struct{})}
	p.ls[addr] = l
	return l
}

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

// pipeLayer is one address of a pipeNet.
type pipeLayer struct {
	net    *pipeNet
	addr   pipeAddr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *pipeLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeLayer) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.net.mu.Lock()
		if l.net.ls[string(l.addr)] == l {
			delete(l.net.ls, string(l.addr))
		}
		l.net.mu.Unlock()
	})
	return nil
}

func (l *pipeLayer) Addr() net.Addr { return l.addr }

// Dial connects to the layer listening at addr, refused when none is, as
// a closed port refuses a TCP dial.
func (l *pipeLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	refused := &net.OpError{Op: "dial", Net: "pipe", Err: syscall.ECONNREFUSED}
	l.net.mu.Lock()
	dst := l.net.ls[string(addr)]
	l.net.mu.Unlock()
	if dst == nil {
		return nil, refused
	}
	mine, theirs := net.Pipe()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case dst.conns <- theirs:
		return mine, nil
	case <-dst.closed:
		return nil, refused
	case <-t.C:
		return nil, &net.OpError{Op: "dial", Net: "pipe", Err: errTimeout}
	}
}
