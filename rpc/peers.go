package rpc

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/rpc/deadconn"
)

// Peers holds this node's gRPC connections to other nodes and implements
// cluster.Peers over them.
type Peers struct {
	opts    []grpc.DialOption
	closed  chan struct{}                 // closed by Close: forwarders stop
	cluster atomic.Pointer[func() string] // the cluster calls name (NameCluster)

	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
	used     map[string]time.Time // when conn last gave out each one
	sweeping bool                 // forgetIdle runs (forget.go)
	done     bool
}

// NewPeers returns a connection pool; opts are added to every connection.
func NewPeers(opts ...grpc.DialOption) *Peers {
	p := &Peers{closed: make(chan struct{}), conns: map[string]*grpc.ClientConn{}, used: map[string]time.Time{}}
	// Forwards are not sent on a connection whose last attempt failed, so
	// a peer back after a long outage must be dialed again soon (Redial).
	p.opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), deadconn.Redial(),
		deadconn.DialOption(), grpc.WithChainUnaryInterceptor(p.nameCluster)}, opts...)
	return p
}

// conn returns the (lazily connecting) connection to addr.
func (p *Peers) conn(addr string) *grpc.ClientConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[addr]
	if c == nil && p.done {
		// Closed: a connection that is never ready, so nothing is sent.
		c, _ = grpc.NewClient("passthrough:///closed", p.opts...)
		return c
	}
	if c == nil {
		var err error
		// passthrough: the dialer resolves a peer's host name at every
		// connection attempt. gRPC's dns resolver would keep a restarted
		// peer's old IP for up to 30 s between lookups, and a pod that
		// moved is known by its name alone.
		if c, err = grpc.NewClient("passthrough:///"+addr, p.opts...); err != nil {
			// NewClient fails only on a malformed target; an address that
			// came from the meta state is well-formed. Use a connection
			// that is never ready, so callers see "not sent".
			c, _ = grpc.NewClient("passthrough:///invalid", p.opts...)
		}
		p.conns[addr] = c
		if !p.sweeping {
			p.sweeping = true
			go sweepEvery(p.closed, forgetEvery, p.forgetIdle)
		}
	}
	p.used[addr] = time.Now()
	return c
}

// DialResolver makes Peers look peers' host names up with r (--dns-server)
// instead of the system's resolver.
func DialResolver(r *net.Resolver) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{Resolver: r}
		return d.DialContext(ctx, "tcp", addr)
	})
}

// Close closes every connection and stops the forwarders using them.
func (p *Peers) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		p.done = true
		close(p.closed)
	}
	for addr, c := range p.conns {
		c.Close()
		delete(p.conns, addr)
		delete(p.used, addr)
	}
	return nil
}

// ApplyMeta implements cluster.Peers.
func (p *Peers) ApplyMeta(ctx context.Context, addr string, cmd []byte) error {
	_, err := peerv1.NewPeerClient(p.conn(addr)).ApplyMeta(ctx, &peerv1.ApplyMetaRequest{Command: cmd})
	return fromStatus(err)
}

// Progress implements cluster.Peers.
func (p *Peers) Progress(ctx context.Context, addr string, group int) (cluster.GroupInfo, error) {
	req := &peerv1.ShardProgressRequest{}
	if group < 0 {
		req.Meta = true
	} else {
		req.Shard = uint32(group)
	}
	resp, err := peerv1.NewPeerClient(p.conn(addr)).ShardProgress(ctx, req)
	if err != nil {
		return cluster.GroupInfo{}, fromStatus(err)
	}
	return cluster.GroupInfo{Present: resp.Present, Leader: resp.Leader, Applied: resp.AppliedIndex,
		Last: resp.LastIndex, Servers: resp.Servers, Term: resp.Term, LastCommand: resp.LastCommand}, nil
}

// MoveApplied implements cluster.Peers.
func (p *Peers) MoveApplied(ctx context.Context, addr string, group int, move uint64, slots []uint32) (bool, bool, error) {
	resp, err := peerv1.NewPeerClient(p.conn(addr)).ShardProgress(ctx,
		&peerv1.ShardProgressRequest{Shard: uint32(group), Move: move, MoveSlots: slots})
	if err != nil {
		return false, false, fromStatus(err)
	}
	if !resp.MoveAnswered {
		return false, false, cluster.ErrNoMoveQuery
	}
	return resp.MoveFrozen, resp.MoveImported, nil
}

// AddNode implements cluster.Peers.
func (p *Peers) AddNode(ctx context.Context, addr string, n *metav1.Node, proof cluster.GossipProof) (string, []string, error) {
	req := &peerv1.AddNodeRequest{Node: n}
	if proof.Given {
		req.GossipKey = &peerv1.GossipKeyProof{Mac: proof.MAC}
	}
	resp, err := peerv1.NewPeerClient(p.conn(addr)).AddNode(ctx, req)
	if err != nil {
		return "", nil, fromStatus(err)
	}
	return resp.ClusterId, resp.GossipAddrs, nil
}

// ExportSlots implements cluster.Peers. An export too large for one
// answer or one import entry (the peer's fsm.ErrExportTooLarge, or this
// side's receive limit: ResourceExhausted either way) is
// fsm.ErrExportTooLarge, which the target meets by asking for fewer slots.
func (p *Peers) ExportSlots(ctx context.Context, addr string, group int, move uint64, slots []uint32) ([]byte, error) {
	resp, err := peerv1.NewPeerClient(p.conn(addr)).ExportSlots(ctx, &peerv1.ExportSlotsRequest{
		Group: uint32(group), Move: move, Slots: slots}, grpc.MaxCallRecvMsgSize(maxExportMessage))
	if status.Code(err) == codes.ResourceExhausted {
		return nil, &peerError{fsm.ErrExportTooLarge, status.Convert(err).Message()}
	}
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.Export, nil
}

// Hello implements cluster.Peers.
func (p *Peers) Hello(ctx context.Context, addr string) (string, string, error) {
	resp, err := peerv1.NewPeerClient(p.conn(addr)).Hello(ctx, &peerv1.HelloRequest{})
	if err != nil {
		return "", "", fromStatus(err)
	}
	return resp.GetNode().GetId(), resp.ClusterId, nil
}

// Clock implements cluster.Peers.
func (p *Peers) Clock(ctx context.Context, addr string) (time.Time, error) {
	resp, err := peerv1.NewPeerClient(p.conn(addr)).Hello(ctx, &peerv1.HelloRequest{})
	if err != nil {
		return time.Time{}, fromStatus(err)
	}
	if resp.UnixNanos == 0 {
		return time.Time{}, fmt.Errorf("%s %w (an older release): its clock is not read", addr, cluster.ErrNoClock)
	}
	return time.Unix(0, resp.UnixNanos), nil
}

// fromStatus turns a peer's gRPC error back into the sentinel the cluster
// package decides on: refusals are final, everything else may be retried.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	s, _ := status.FromError(err)
	switch s.Code() {
	case codes.FailedPrecondition:
		return &peerError{fsm.ErrRefused, s.Message()}
	case codes.NotFound:
		if strings.Contains(s.Message(), fsm.ErrUnknownPolicy.Error()) {
			return &peerError{fsm.ErrUnknownPolicy, s.Message()}
		}
		return &peerError{cluster.ErrUnknownNode, s.Message()}
	case codes.InvalidArgument:
		return &peerError{cluster.ErrConfig, s.Message()}
	case codes.Unauthenticated, codes.PermissionDenied:
		return &deniedError{code: s.Code(), msg: s.Message()}
	case codes.Unavailable:
		if strings.Contains(s.Message(), cluster.ErrMemberAlive.Error()) {
			return fmt.Errorf("%w (%w): %s", cluster.ErrMemberAlive, cluster.ErrNoLeader, s.Message())
		}
	}
	return &peerError{cluster.ErrNoLeader, s.Message()}
}

// peerError is an error a peer answered with: it matches the error the
// answer's code maps to, and prints the peer's message without repeating
// that error's text when the message starts with it already ("invalid
// configuration: invalid configuration: ...").
type peerError struct {
	sentinel error
	msg      string
}

func (e *peerError) Error() string {
	if strings.HasPrefix(e.msg, e.sentinel.Error()) {
		return e.msg
	}
	return e.sentinel.Error() + ": " + e.msg
}

func (e *peerError) Unwrap() error { return e.sentinel }

// deniedError is a peer's refusal of this node's credentials: final for a
// join (cluster.ErrDenied), retryable for other calls (cluster.ErrNoLeader:
// a token may be mid-rotation).
type deniedError struct {
	code codes.Code
	msg  string
}

func (e *deniedError) Error() string {
	return fmt.Sprintf("%v: %s: %s", cluster.ErrDenied, e.code, e.msg)
}

// Is makes errors.Is hold for cluster.ErrDenied and cluster.ErrNoLeader.
func (e *deniedError) Is(target error) bool {
	return target == cluster.ErrDenied || target == cluster.ErrNoLeader
}
