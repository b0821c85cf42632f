package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/raftnet"
)

// Every connection to the Raft port starts with a header naming the group
// it is for: muxMagic, then the name's length (one byte) and the name. One
// accept loop reads it and hands the connection to that group's transport,
// so all Raft groups of a node share one TCP port.
const (
	muxMagic         = 0xFD
	muxHeaderTimeout = 5 * time.Second
	// muxBacklog is how many accepted connections wait for a group's
	// transport before new ones are refused.
	muxBacklog = 64
)

// Mux shares one TCP listener among the node's Raft groups.
type Mux struct {
	ln        net.Listener
	advertise net.Addr
	tls       *PeerTLS // nil: plaintext
	log       *slog.Logger
	// resolver looks up the host names peers advertise, at every dial,
	// so a peer that came back at a new IP under its name is found
	// (nil: the system's).
	resolver *net.Resolver
	// held: every inbound connection is closed until Admit. A node whose
	// data dir the cluster has not taken yet must not hear its peers: a
	// member's lost dir started again under its id would take their log
	// and grant votes with none of its old ones (see Node.accept).
	held    atomic.Bool
	refused atomic.Uint64 // connections closed while held

	mu     sync.Mutex
	layers map[string]*muxLayer
	closed bool
	wg     sync.WaitGroup
}

// NewMux starts accepting on ln. advertise is the address peers dial (ln's
// address when nil). With sec, every connection, both ways, is mutual TLS
// and the group header travels inside it. A held mux closes every inbound
// connection until Admit; dialing out works either way.
func NewMux(ln net.Listener, advertise net.Addr, sec *PeerTLS, log *slog.Logger, held bool) *Mux {
	if advertise == nil {
		advertise = ln.Addr()
	}
	m := &Mux{ln: ln, advertise: advertise, tls: sec, log: log, layers: map[string]*muxLayer{}}
	m.held.Store(held)
	m.wg.Add(1)
	go m.serve()
	return m
}

// Addr is the advertised Raft address.
func (m *Mux) Addr() net.Addr { return m.advertise }

// Admit lets inbound connections through a held mux; peers that were
// refused dial again on their own (raft retries with backoff).
func (m *Mux) Admit() { m.held.Store(false) }

// Held reports whether inbound connections are still refused.
func (m *Mux) Held() bool { return m.held.Load() }

// Refused is how many inbound connections a held mux closed.
func (m *Mux) Refused() uint64 { return m.refused.Load() }

func (m *Mux) serve() {
	defer m.wg.Done()
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			m.mu.Lock()
			closed := m.closed
			m.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			m.log.Warn("raft mux accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		// Read the header off the accept loop so a slow peer cannot stall
		// everyone else's connections.
		go m.route(conn)
	}
}

func (m *Mux) route(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(muxHeaderTimeout))
	if m.tls != nil {
		tc := tls.Server(conn, m.tls.Server)
		if err := tc.Handshake(); err != nil {
			m.log.Debug("raft mux: TLS handshake refused", "remote", conn.RemoteAddr(), "err", err)
			conn.Close()
			return
		}
		conn = tc
	}
	var hdr [2]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil || hdr[0] != muxMagic {
		conn.Close()
		return
	}
	name := make([]byte, hdr[1])
	if _, err := io.ReadFull(conn, name); err != nil {
		conn.Close()
		return
	}
	if m.held.Load() {
		m.refused.Add(1)
		if string(name) == raftnet.LayerName {
			// Told, not closed: a dialer that took this node for an older
			// release would call it through NetworkTransport once admitted,
			// where no handshake names a cluster.
			raftnet.RefuseHeld(conn, muxHeaderTimeout)
			return
		}
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	m.mu.Lock()
	l := m.layers[string(name)]
	m.mu.Unlock()
	if l == nil {
		// The group is not (yet) open here; the dialer retries with backoff.
		conn.Close()
		return
	}
	select {
	case <-l.done:
		conn.Close()
		return
	default:
	}
	select {
	case l.conns <- conn:
	default:
		conn.Close() // the group is not keeping up: the dialer retries
	}
}

// Layer returns the stream layer of group name, registering it. A name can
// be registered once at a time; close the layer to release it.
func (m *Mux) Layer(name string) (raft.StreamLayer, error) {
	if len(name) == 0 || len(name) > 255 {
		return nil, fmt.Errorf("raft mux: bad group name %q", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, net.ErrClosed
	}
	if _, ok := m.layers[name]; ok {
		return nil, fmt.Errorf("raft mux: group %q already registered", name)
	}
	l := &muxLayer{mux: m, name: name, conns: make(chan net.Conn, muxBacklog), done: make(chan struct{})}
	m.layers[name] = l
	return l, nil
}

// Close stops accepting and closes every layer.
func (m *Mux) Close() error {
	m.mu.Lock()
	m.closed = true
	layers := m.layers
	m.layers = map[string]*muxLayer{}
	m.mu.Unlock()
	err := m.ln.Close()
	for _, l := range layers {
		l.shut()
	}
	m.wg.Wait()
	return err
}

// muxLayer is one group's view of the mux: a raft.StreamLayer.
type muxLayer struct {
	mux   *Mux
	name  string
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Dial connects to a peer's Raft port and names this layer's group.
func (l *muxLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, Resolver: l.mux.resolver}
	conn, err := d.Dial("tcp", string(addr))
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if sec := l.mux.tls; sec != nil {
		cfg := sec.Client()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(string(addr)) // the name the peer's certificate must hold
		}
		tc := tls.Client(conn, cfg)
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("raft mux: TLS to %s: %w", addr, err)
		}
		conn = tc
	}
	hdr := append([]byte{muxMagic, byte(len(l.name))}, l.name...)
	if _, err := conn.Write(hdr); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// Accept waits for the next connection routed to this group.
func (l *muxLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close unregisters the group; its pending connections are closed.
func (l *muxLayer) Close() error {
	l.mux.mu.Lock()
	if l.mux.layers[l.name] == l {
		delete(l.mux.layers, l.name)
	}
	l.mux.mu.Unlock()
	l.shut()
	return nil
}

func (l *muxLayer) shut() {
	l.once.Do(func() {
		close(l.done)
		for {
			select {
			case c := <-l.conns:
				c.Close()
			default:
				return
			}
		}
	})
}

// Addr is the advertised Raft address, the same for every group.
func (l *muxLayer) Addr() net.Addr { return l.mux.advertise }
