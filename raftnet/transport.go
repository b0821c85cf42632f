package raftnet

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// LayerName is the name the Raft port's mux knows raftnet connections by;
// group names (meta, shard-N) never take it.
const LayerName = "raftnet"

// legacyRetry is how long a peer that refused the handshake is reached
// through NetworkTransport before raftnet is tried again. A node of an
// older release refuses every time, at the cost of one dial per retry; a
// node of this release refuses too while its Raft port is held (a fresh
// node not taken yet) and while it stops or dies, so the retry comes
// within seconds, not a minute. (A replicating call that then cannot
// dial the peer through NetworkTransport either waits for it on raftnet
// at once: rpc.)
const legacyRetry = 5 * time.Second

// Config's defaults; see its fields.
const (
	defaultDialTimeout = 2 * time.Second
	defaultSilence     = 3 * time.Second
)

// Config configures a Network.
type Config struct {
	// Layer dials peers' Raft ports (the mux header for LayerName and TLS
	// included) and accepts the connections peers dial to this node's.
	Layer raft.StreamLayer
	// Timeout bounds a write and a call without an answer (10s by
	// default, as NetworkTransport).
	Timeout time.Duration
	// DialTimeout bounds each step of a dial: the connection, TLS and the
	// mux header, the hello (2s, or Timeout if shorter, by default). The
	// kernel resends a lost SYN 1 s, 3 s and 7 s after the first: a dial
	// still waiting when a partition heals would keep every group's calls
	// to that peer waiting for the next resend, while a fresh dial gets
	// through at once.
	DialTimeout time.Duration
	// Silence is how long a call may wait with nothing at all coming back
	// on its link before the link is failed and the peer dialed again (3s
	// by default; never more than Timeout). Heartbeats cross a live link
	// many times a second; a link silent that long is one whose TCP
	// connection lost its peer (a cut, a paused process) and waits out
	// retransmission backoff, which after a long cut would hold the
	// peer's groups for seconds after it heals.
	Silence time.Duration
	// PeerWait bounds how long a replicating AppendEntries waits for a
	// peer it cannot reach (Transport.Await; a minute by default).
	PeerWait time.Duration
	// Cluster names the cluster this node belongs to, "" while it knows
	// none (a fresh node); every handshake carries it. Nil is "".
	Cluster func() string
	// Admit judges a peer by the cluster its handshake names, both ways:
	// a dialer this node refuses is told so, and a peer this node refuses
	// is not called (ErrOtherCluster). Nil admits every peer.
	Admit  func(cluster string) error
	Logger *slog.Logger
}

// Network is a node's raftnet: its links to peers and its groups'
// transports.
type Network struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	groups  map[string]*Transport
	links   map[raft.ServerAddress]*link
	dialing map[raft.ServerAddress]*dialing
	legacy  map[raft.ServerAddress]time.Time // refused the handshake, until
	tried   map[raft.ServerAddress]time.Time // a waiting call's last dial, at
	warned  map[string]time.Time             // a refused peer's last warning, at
	closed  bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// dialing is a link being dialed; callers for the same peer wait for it.
type dialing struct {
	done chan struct{}
	l    *link
	err  error
}

// New starts a Network: it accepts peers' links on cfg.Layer.
func New(cfg Config) *Network {
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = min(defaultDialTimeout, cfg.Timeout)
	}
	if cfg.Silence <= 0 {
		cfg.Silence = defaultSilence
	}
	cfg.Silence = min(cfg.Silence, cfg.Timeout) // a call fails at Timeout anyway
	if cfg.PeerWait == 0 {
		cfg.PeerWait = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Network{cfg: cfg, log: cfg.Logger, groups: map[string]*Transport{}, links: map[raft.ServerAddress]*link{},
		dialing: map[raft.ServerAddress]*dialing{}, legacy: map[raft.ServerAddress]time.Time{},
		tried: map[raft.ServerAddress]time.Time{}, warned: map[string]time.Time{}, stop: make(chan struct{})}
	n.wg.Add(2)
	go n.accept()
	go n.watch()
	return n
}

// Close stops accepting, closes every link and fails the calls on them.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	links := n.links
	n.links = map[raft.ServerAddress]*link{}
	n.mu.Unlock()
	close(n.stop)
	err := n.cfg.Layer.Close()
	for _, l := range links {
		l.close()
	}
	n.wg.Wait()
	return err
}

// watch expires calls nobody answered and links that went silent, and
// forgets failed links and old refusals.
func (n *Network) watch() {
	defer n.wg.Done()
	t := time.NewTicker(max(n.cfg.Silence/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-t.C:
			n.mu.Lock()
			links := make([]*link, 0, len(n.links))
			for addr, l := range n.links {
				if !l.alive() {
					// A peer that left, or moved to another address, is
					// never dialed again: its failed link would be kept,
					// with its connection and buffers, for good.
					delete(n.links, addr)
					continue
				}
				links = append(links, l)
			}
			for addr, until := range n.legacy {
				if !now.Before(until) {
					delete(n.legacy, addr)
				}
			}
			for addr, at := range n.tried {
				if now.Sub(at) >= redialEvery {
					delete(n.tried, addr)
				}
			}
			n.mu.Unlock()
			for _, l := range links {
				l.expire(now)
			}
		}
	}
}

// dial opens a connection to addr for use, handshake done.
func (n *Network) dial(addr raft.ServerAddress, use byte) (net.Conn, error) {
	conn, err := n.cfg.Layer.Dial(addr, n.cfg.DialTimeout)
	if err != nil {
		return nil, err
	}
	if err := sendHello(conn, use, n.cluster(), n.cfg.Admit, conn.SetDeadline, n.cfg.DialTimeout); err != nil {
		conn.Close()
		if errors.Is(err, ErrOtherCluster) {
			n.warnRefusal(string(addr), "raftnet: not calling a peer of another cluster", "peer", addr, "err", err)
		}
		return nil, err
	}
	return conn, nil
}

// cluster is the cluster this node's handshakes name.
func (n *Network) cluster() string {
	if n.cfg.Cluster == nil {
		return ""
	}
	return n.cfg.Cluster()
}

// warnRefusalEvery bounds how often one refusal is logged: the groups of
// a node whose member's address a node of another cluster took call it
// again and again.
const warnRefusalEvery = time.Minute

// maxWarned bounds the peers whose last refusal warning is kept: the
// hosts that reach the Raft port are not this node's to choose.
const maxWarned = 1024

// warnRefusal logs a handshake refused for its cluster, once a
// warnRefusalEvery for each key: the peer (its address, or a dialer's
// host), never the refusal's text, which names a cluster the peer chose
// (one made up at each hello would be logged, and kept, each time).
func (n *Network) warnRefusal(key, msg string, args ...any) {
	now := time.Now()
	n.mu.Lock()
	last, seen := n.warned[key]
	log := !seen || now.Sub(last) >= warnRefusalEvery
	if log && !seen && len(n.warned) >= maxWarned {
		for k, at := range n.warned {
			if now.Sub(at) >= warnRefusalEvery {
				delete(n.warned, k)
			}
		}
		log = len(n.warned) < maxWarned // else a flood of peers: not each logged
	}
	if log {
		n.warned[key] = now
	}
	n.mu.Unlock()
	if log {
		n.log.Warn(msg, args...)
	}
}

// linkTo returns the link to addr, dialing it if there is none. It fails
// with errNotSpoken for a peer that does not speak raftnet.
func (n *Network) linkTo(addr raft.ServerAddress) (*link, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, raft.ErrTransportShutdown
	}
	if until, ok := n.legacy[addr]; ok {
		if time.Now().Before(until) {
			n.mu.Unlock()
			return nil, errNotSpoken
		}
		delete(n.legacy, addr)
	}
	if l := n.links[addr]; l != nil && l.alive() {
		n.mu.Unlock()
		return l, nil
	}
	if d := n.dialing[addr]; d != nil {
		n.mu.Unlock()
		<-d.done
		return d.l, d.err
	}
	d := &dialing{done: make(chan struct{})}
	n.dialing[addr] = d
	n.mu.Unlock()

	conn, err := n.dial(addr, useLink)
	n.mu.Lock()
	delete(n.dialing, addr)
	switch {
	case err == nil && n.closed:
		conn.Close()
		err = raft.ErrTransportShutdown
	case err == nil:
		d.l = newLink(addr, conn, n.cfg.Timeout, n.cfg.Silence)
		n.links[addr] = d.l
	case errors.Is(err, errNotSpoken):
		n.legacy[addr] = time.Now().Add(legacyRetry)
		n.log.Info("raftnet: peer does not speak raftnet, using NetworkTransport", "peer", addr)
	}
	n.mu.Unlock()
	d.err = err
	close(d.done)
	return d.l, err
}

// group returns the transport of the group named name, or nil.
func (n *Network) group(name string) *Transport {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.groups[name]
}

// Transport returns the transport of group name. fallback, when not nil,
// carries the group's RPCs to peers that do not speak raftnet, and the
// RPCs they send it arrive through it too; addrs, when not nil, tells the
// address of a server id (else the configuration's address is dialed).
// Close the transport before opening another for the same name.
func (n *Network) Transport(name string, fallback *raft.NetworkTransport, addrs raft.ServerAddressProvider) (*Transport, error) {
	t := &Transport{n: n, group: name, consumer: make(chan raft.RPC), fallback: fallback, addrs: addrs, closed: make(chan struct{})}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, raft.ErrTransportShutdown
	}
	if n.groups[name] != nil {
		return nil, fmt.Errorf("raftnet: group %q already has a transport", name)
	}
	n.groups[name] = t
	if fallback != nil {
		go t.relay()
	}
	return t, nil
}

// Transport is one group's raft.Transport over its node's Network.
type Transport struct {
	n        *Network
	group    string
	consumer chan raft.RPC
	fallback *raft.NetworkTransport
	addrs    raft.ServerAddressProvider

	hbMu    sync.Mutex // guards hb, leading and back
	hb      func(raft.RPC)
	leading func() bool            // Await's; nil: no call waits
	back    map[raft.ServerID]bool // peers whose next pipeline is refused (await.go)

	closeOnce sync.Once
	closed    chan struct{}
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
)

// relay hands what the fallback receives (from peers of an older release)
// to raft with the rest.
func (t *Transport) relay() {
	for {
		select {
		case rpc := <-t.fallback.Consumer():
			select {
			case t.consumer <- rpc:
			case <-t.closed:
				rpc.Respond(nil, raft.ErrTransportShutdown)
				return
			}
		case <-t.closed:
			return
		}
	}
}

// deliver hands cmd to raft and waits for its answer.
func (t *Transport) deliver(cmd any, data io.Reader) (any, error) {
	ch := make(chan raft.RPCResponse, 1)
	select {
	case t.consumer <- raft.RPC{Command: cmd, Reader: data, RespChan: ch}:
	case <-t.closed:
		return nil, raft.ErrTransportShutdown
	}
	select {
	case r := <-ch:
		return r.Response, r.Error
	case <-t.closed:
		return nil, raft.ErrTransportShutdown
	}
}

func (t *Transport) heartbeatHandler() func(raft.RPC) {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	return t.hb
}

// Consumer implements raft.Transport.
func (t *Transport) Consumer() <-chan raft.RPC { return t.consumer }

// LocalAddr implements raft.Transport.
func (t *Transport) LocalAddr() raft.ServerAddress {
	return raft.ServerAddress(t.n.cfg.Layer.Addr().String())
}

// SetHeartbeatHandler implements raft.Transport.
func (t *Transport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.hbMu.Lock()
	t.hb = cb
	t.hbMu.Unlock()
	if t.fallback != nil {
		t.fallback.SetHeartbeatHandler(cb)
	}
}

// EncodePeer implements raft.Transport.
func (t *Transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }

// DecodePeer implements raft.Transport.
func (t *Transport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// Close implements raft.WithClose.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		close(t.closed)
		t.n.mu.Lock()
		if t.n.groups[t.group] == t {
			delete(t.n.groups, t.group)
		}
		t.n.mu.Unlock()
		if t.fallback != nil {
			t.fallback.Close()
		}
	})
	return nil
}

// resolve is the address of server id: the address provider's, else
// target (the configuration's).
func (t *Transport) resolve(id raft.ServerID, target raft.ServerAddress) raft.ServerAddress {
	if t.addrs != nil {
		if addr, err := t.addrs.ServerAddr(id); err == nil && addr != "" {
			return addr
		}
	}
	return target
}

// route resolves target and its link; a nil link with no error means the
// peer is reached through the fallback.
func (t *Transport) route(id raft.ServerID, target raft.ServerAddress) (*link, error) {
	l, err := t.n.linkTo(t.resolve(id, target))
	if errors.Is(err, errNotSpoken) {
		if t.fallback == nil {
			return nil, err
		}
		return nil, nil
	}
	return l, err
}

// roundTrip sends cmd on l and waits for its answer in resp.
func (t *Transport) roundTrip(l *link, cmd, resp any) error {
	ch := make(chan error, 1)
	if err := l.call(t.group, cmd, resp, func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-t.closed:
		return raft.ErrTransportShutdown
	}
}

// rpc makes one call to a server: on its link (waiting for an
// unreachable peer if wait, as Await allows), or through legacy (the
// fallback's method) for a peer that does not speak raftnet.
func rpc[Req, Resp any](t *Transport, wait bool, id raft.ServerID, target raft.ServerAddress, args Req, resp Resp,
	legacy func(raft.ServerID, raft.ServerAddress, Req, Resp) error) error {
	l, err := t.route(id, target)
	if wait && unreached(err) {
		if l, err = t.await(id, target, err); err == nil {
			t.setBack(id)
		}
	}
	switch {
	case err != nil:
		return err
	case l != nil:
		return t.roundTrip(l, args, resp)
	}
	err = legacy(id, target, args, resp)
	if !wait || !dialFailed(err) {
		return err
	}
	// The peer closed a handshake and now cannot be reached at all: a
	// node of this release does both as it stops. Wait for it as for any
	// peer that is down (else raft's backoff grows until legacyRetry
	// ends); once back, it says again which transport it speaks.
	t.n.forgetLegacy(t.resolve(id, target))
	if l, err = t.await(id, target, err); err != nil {
		return err
	}
	t.setBack(id)
	if l == nil {
		return legacy(id, target, args, resp)
	}
	return t.roundTrip(l, args, resp)
}

// AppendEntriesPipeline implements raft.Transport.
func (t *Transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.takeBack(id) {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	l, err := t.route(id, target)
	switch {
	case err != nil:
		return nil, err
	case l == nil:
		return t.fallback.AppendEntriesPipeline(id, target)
	}
	return newPipeline(l, t.group), nil
}

// AppendEntries implements raft.Transport.
func (t *Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	fitEntries(args)
	// Heartbeats fail at once: raft counts its contact with a peer by them.
	return rpc(t, !isHeartbeat(args), id, target, args, resp, t.fallback.AppendEntries)
}

// RequestVote implements raft.Transport.
func (t *Transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return rpc(t, false, id, target, args, resp, t.fallback.RequestVote)
}

// RequestPreVote implements raft.WithPreVote.
func (t *Transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return rpc(t, false, id, target, args, resp, t.fallback.RequestPreVote)
}

// TimeoutNow implements raft.Transport.
func (t *Transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return rpc(t, false, id, target, args, resp, t.fallback.TimeoutNow)
}

// InstallSnapshot implements raft.Transport.
func (t *Transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	l, err := t.route(id, target)
	switch {
	case err != nil:
		return err
	case l == nil:
		return t.fallback.InstallSnapshot(id, target, args, resp, data)
	}
	return t.installSnapshot(t.resolve(id, target), args, resp, data)
}
