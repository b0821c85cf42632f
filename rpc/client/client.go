package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/authz"
	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/deadconn"
	"github.com/floodgate/floodgate/rpc/validate"
)

// Errors of the client.
var (
	// ErrNoNodes means none of the given addresses answered.
	ErrNoNodes = errors.New("floodgate: no node reachable")
)

// Options configure a Client.
type Options struct {
	// Addrs are gRPC addresses of some cluster nodes; the client learns
	// the rest from them.
	Addrs []string
	// FailOpen admits requests the cluster cannot answer (Unavailable,
	// DeadlineExceeded) instead of returning the error, from New on: a
	// client made while no node answers (for up to CallTimeout) starts,
	// and admits its checks until it reaches one. Invalid requests
	// still fail, as do checks of new keys a full cluster refuses
	// (ResourceExhausted, --max-key-states): it answered. So do checks
	// whose caller's context ended first (canceled, or its own deadline
	// passed): the caller gave up, the cluster may well answer.
	FailOpen bool
	// OnError, if set, hears about every failed call, including those
	// FailOpen turned into an admission.
	OnError func(error)
	// RefreshInterval is how often the routing table is refreshed (default
	// 5s); it is also refreshed after errors.
	RefreshInterval time.Duration
	// TLS secures every connection (nil: plaintext). For PEM files that
	// are reloaded when they change, see tlsconf.NewReloader and its
	// ClientConfig.
	TLS *tls.Config
	// Token is sent as a bearer token with every call, for nodes that
	// check callers: the admin token for calls that change the cluster.
	// Surrounding white space is dropped (a token read from a file ends
	// in a newline); New refuses one gRPC cannot send.
	Token string
	// DialOptions are added to every connection, after those of TLS and
	// Token, and after the SDK's keepalive and redial (package deadconn:
	// on Linux a connection whose node stopped acknowledging for 5 s is
	// dropped instead of waiting out TCP's retransmission backoff, and a
	// node that was down is dialed again at least once a second, not
	// after up to two minutes as gRPC's default backoff has it).
	DialOptions []grpc.DialOption
	// CallTimeout bounds each check when the caller's context allows
	// longer (default 3s: a node answers within its --leader-wait, 2s by
	// default, so only a stalled node, paused or cut off, takes longer).
	// The check's outcome is then unknown and reported as
	// DeadlineExceeded.
	CallTimeout time.Duration
	// NoCoalescing sends every single check (Allow, Decide, a Policy's
	// Allow) in a call of its own. By default, under load, checks bound
	// for a node that has a call in flight from this client wait for it
	// and go out together in one AllowBatch call: each is still answered
	// alone, but a busy node serves far more checks a second. A check
	// naming a policy the client has not learned yet, or whose context
	// carries outgoing metadata, always goes alone.
	NoCoalescing bool
}

// Client is a floodgate client. It is safe for concurrent use.
type Client struct {
	opts Options

	mu       sync.RWMutex
	conns    map[string]*grpc.ClientConn
	gone     map[string]time.Time // address of conns no node lists → since when
	shards   int
	leaders  map[int]string // group (legacy: shard) → leader's gRPC address
	table    []uint32       // slot → group; nil in a legacy cluster
	nodes    []string       // every node's gRPC address
	policies map[string]*policy.Policy
	co       *coalescer // nil under NoCoalescing

	rr        atomic.Uint64
	refresh   chan struct{}
	stop      chan struct{}
	endLife   context.CancelFunc // ends the refresher's calls at Close
	closeOnce sync.Once          // Close may be called more than once
	done      chan struct{}
	closed    bool             // under mu: Close has run
	dead      *grpc.ClientConn // under mu: a closed connection, for calls after Close
}

// New connects to the cluster at opts.Addrs and loads its routing table.
// It fails when no node answers, unless opts.FailOpen: the client is
// then returned, OnError hears why, and the routes load once a node
// answers.
func New(ctx context.Context, opts Options) (*Client, error) {
	if len(opts.Addrs) == 0 {
		return nil, fmt.Errorf("%w: no addresses given", ErrNoNodes)
	}
	opts.Token = strings.TrimSpace(opts.Token)
	if err := authz.Sendable(opts.Token); err != nil {
		return nil, fmt.Errorf("floodgate: Options.Token: %w", err)
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = 5 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 3 * time.Second
	}
	life, endLife := context.WithCancel(context.Background())
	c := &Client{
		opts:    opts,
		endLife: endLife,
		conns:   map[string]*grpc.ClientConn{},
		gone:    map[string]time.Time{},
		nodes:   append([]string(nil), opts.Addrs...),
		refresh: make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if !opts.NoCoalescing {
		c.co = newCoalescer(c.allowOn, c.batchOn)
		c.co.onStall, c.co.probe = c.kick, c.probe
	}
	lctx, cancel := c.startContext(ctx)
	err := c.loadRoutes(lctx)
	cancel()
	if err != nil && !(opts.FailOpen && c.failOpen(ctx, err)) {
		endLife()
		c.closeConns()
		return nil, err
	}
	go c.refresher(life)
	return c, nil
}

// startContext bounds New's first load of the routes. A client that fails
// open must start while no node answers (a service deployed or restarted
// during an outage would otherwise fail to start, or wait out its
// caller's deadline on an unreachable network): it waits one CallTimeout
// at most, and then admits its checks until the refresher, kicked by each
// of them, has loaded the routes.
func (c *Client) startContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !c.opts.FailOpen {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.opts.CallTimeout)
}

// Allow checks one request on the leader of its key's shard. An invalid
// request fails at once (InvalidArgument), whatever FailOpen says. Under
// FailOpen an unanswered check is admitted with Remaining -1 (Decide
// says FailedOpen).
func (c *Client) Allow(ctx context.Context, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	resp, open, err := c.allow(ctx, req)
	if open {
		return &pb.AllowResponse{Allowed: true, Remaining: -1}, nil
	}
	return resp, err
}

// Decide is Allow with a typed answer.
func (c *Client) Decide(ctx context.Context, req *pb.AllowRequest) (Decision, error) {
	return c.decide(ctx, req)
}

func (c *Client) decide(ctx context.Context, req *pb.AllowRequest) (Decision, error) {
	resp, open, err := c.allow(ctx, req)
	switch {
	case open:
		return failedOpen(), nil
	case err != nil:
		return Decision{}, err
	}
	return DecisionOf(resp), nil
}

// allow checks req and reports whether FailOpen admitted it unanswered.
func (c *Client) allow(ctx context.Context, req *pb.AllowRequest) (*pb.AllowResponse, bool, error) {
	key, known, doubt, err := c.check(req, "")
	if err != nil {
		return nil, false, err
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	var resp *pb.AllowResponse
	// A check naming a policy the client has not learned goes alone: the
	// node looks it up, and may refuse or delay the whole batch for it (an
	// unknown name, a node still catching up), failing or slowing the
	// other checks sharing the call.
	if c.co != nil && known {
		resp, err = c.coalesced(ctx, c.route(key), req)
	} else {
		resp, err = c.allowOn(ctx, c.route(key), req)
	}
	if err != nil {
		c.refusedByNode(req, err)
		open := c.failOpen(caller, err)
		if open && doubt != nil {
			// Not admitted unasked: the local copy refused it. But the
			// check was sent, and may have counted: marked so that it is
			// not sent again (Policy.AllowN resends a refused check).
			return nil, false, sentRefusal{doubt}
		}
		return nil, open, err
	}
	return resp, false, nil
}

// sentRefusal is the client's own refusal (its copy of the policy's) of
// a check it sent anyway, the copy being perhaps stale, and whose answer
// was lost: its status is the refusal's, but unlike a node's refusal it
// does not mean nothing was counted.
type sentRefusal struct{ error }

// GRPCStatus gives the refusal's status (InvalidArgument).
func (e sentRefusal) GRPCStatus() *status.Status { return status.Convert(e.error) }

// Unwrap returns the refusal.
func (e sentRefusal) Unwrap() error { return e.error }

// allowOn sends one check to the node at addr (another if addr is down).
func (c *Client) allowOn(ctx context.Context, addr string, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	return onNodes(ctx, c, addr, func(rl pb.RateLimiterClient, opts ...grpc.CallOption) (*pb.AllowResponse, error) {
		return rl.Allow(ctx, req, opts...)
	})
}

// batchOn sends checks to the node at addr in one call (to another if
// addr is down).
func (c *Client) batchOn(ctx context.Context, addr string, reqs []*pb.AllowRequest) (*pb.AllowBatchResponse, error) {
	batch := &pb.AllowBatchRequest{Requests: reqs}
	return onNodes(ctx, c, addr, func(rl pb.RateLimiterClient, opts ...grpc.CallOption) (*pb.AllowBatchResponse, error) {
		return rl.AllowBatch(ctx, batch, opts...)
	})
}

// AllowBatch checks many requests: they are split by shard leader and sent
// to each leader at once; results come back in request order. An invalid
// request fails the whole call at once. A batch naming a policy the client
// has not learned yet goes whole to one node, which checks it whole (an
// unknown name fails the call and counts nothing) and forwards each check. A node's failure is its checks'
// alone: under FailOpen a check the cluster could not answer
// (Unavailable, DeadlineExceeded, for the node's whole call or for the
// item) is admitted with Remaining -1, as Allow admits it; otherwise it is
// the item's error, and the answers of the other nodes, which counted,
// are kept. When every node's call failed and none was admitted, the call
// fails (with the error of the first request's node). As for Allow, a
// check whose node failed after the call reached it (Unavailable,
// DeadlineExceeded) may or may not have counted: sending it again may
// count it twice. OnError hears of every failure.
func (c *Client) AllowBatch(ctx context.Context, reqs []*pb.AllowRequest) (*pb.AllowBatchResponse, error) {
	if err := validate.Batch(len(reqs)); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if len(reqs) == 0 { // as a node answers it: no results, not a nil response
		return &pb.AllowBatchResponse{}, nil
	}
	groups := map[string][]int{}
	var lead string // the first request's node
	whole := false  // the batch goes to one node, which checks it whole
	for i, r := range reqs {
		key, known, doubt, err := c.check(r, validate.Elem("requests", i))
		if err == nil {
			err = doubt // a batch is checked whole, here as on the node
		}
		if err != nil {
			return nil, err
		}
		addr := c.route(key)
		if i == 0 {
			lead = addr
		}
		// A policy the client has not learned is checked by a node: split
		// by leader, a name the cluster does not know would fail its
		// node's part alone, naming the item by its index there, while
		// the other nodes counted theirs.
		whole = whole || !known
		groups[addr] = append(groups[addr], i)
	}
	if whole {
		// The node checks the batch whole and forwards each check to its
		// leader (one hop).
		groups = map[string][]int{lead: make([]int, len(reqs))}
		for i := range reqs {
			groups[lead][i] = i
		}
	}
	out := &pb.AllowBatchResponse{Results: make([]*pb.AllowBatchItem, len(reqs))}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed = map[string]error{}
	)
	for addr, idx := range groups {
		wg.Go(func() {
			sub := make([]*pb.AllowRequest, len(idx))
			for j, i := range idx {
				sub[j] = reqs[i]
			}
			resp, err := c.batchOn(ctx, addr, sub)
			err = renumber(err, idx)
			if err == nil && len(resp.Results) != len(idx) {
				err = fmt.Errorf("floodgate: %s answered %d of %d checks", addr, len(resp.Results), len(idx))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[addr] = err
				return
			}
			for j, i := range idx {
				out.Results[i] = resp.Results[j]
			}
		})
	}
	wg.Wait()
	// The items the nodes answered with an error first (the slots of
	// failed calls are still empty), then the failed calls' items. An
	// item holding neither a decision nor an error is an error too
	// (Internal), as the coalescer reads it: passed on, it would read as
	// a denial nobody made.
	for i, it := range out.Results {
		if it == nil {
			continue
		}
		if _, err := itemOf(it); err != nil { // an error, OK code or not
			c.refusedByNode(reqs[i], err)
			out.Results[i] = failedItem(err, c.failOpen(caller, err))
		}
	}
	var refused error // of the first request's failed call FailOpen did not admit
	admitted, first := 0, len(reqs)
	for addr, err := range failed {
		open := c.failOpen(caller, err)
		if open {
			admitted++
		} else if groups[addr][0] < first {
			first, refused = groups[addr][0], err
		}
		for _, i := range groups[addr] {
			out.Results[i] = failedItem(err, open)
		}
	}
	if len(failed) == len(groups) && admitted == 0 {
		// Every node failed (one node, the caller's context ended, the
		// cluster down without FailOpen): the call fails as a call to
		// one node would, with the error of the first request's node.
		// What the nodes counted is unknown, as it is for that call.
		return nil, refused
	}
	return out, nil
}

// failedItem is the answer of a check whose node failed with err: an
// admission when FailOpen admits it (open), else the error.
func failedItem(err error, open bool) *pb.AllowBatchItem {
	if open {
		return &pb.AllowBatchItem{Response: &pb.AllowResponse{Allowed: true, Remaining: -1}}
	}
	s := status.Convert(err)
	return &pb.AllowBatchItem{Error: &pb.ItemError{Code: uint32(s.Code()), Message: s.Message()}}
}

// Admin returns the Admin service of one of the nodes.
func (c *Client) Admin() pb.AdminClient { return pb.NewAdminClient(c.anyConn()) }

// Close stops the client and closes its connections.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.endLife() // a refresh stuck on a node that does not answer ends now
		<-c.done
		c.mu.Lock()
		c.closed = true // calls still in flight (a coalesced batch) dial nothing new
		c.mu.Unlock()
		if c.co != nil {
			c.co.close()
		}
		c.closeConns()
	})
	return nil
}

// check validates req locally, with the rules the servers apply (except
// the sliding-log cap, which is the servers' setting), and returns the key
// it will be counted under, for routing, and whether the client knew its
// policy (inline limits always). A policy the client has not learned yet
// is left to the servers to check. So is a request that the client's copy
// of its policy refuses but that passes without it: the copy may be
// stale (the policy changed since the last refresh, which this starts);
// doubt then holds the local refusal, which stands if no node can be
// asked.
func (c *Client) check(req *pb.AllowRequest, field string) (key string, known bool, doubt, err error) {
	var resolve validate.Resolver
	known = true
	if req.GetPolicy() != "" { // a nil req is refused below, naming its field
		c.mu.RLock()
		p := c.policies[req.Policy]
		c.mu.RUnlock()
		if known = p != nil; known {
			resolve = func(string) (*policy.Policy, error) { return p, nil }
		}
	}
	chk, err := validate.Request(req, field, math.MaxInt64, resolve, nil)
	if err != nil && known && req.GetPolicy() != "" {
		if unknown, uerr := validate.Request(req, field, math.MaxInt64, nil, nil); uerr == nil {
			c.kick()
			return unknown.Key, false, status.Error(codes.InvalidArgument, err.Error()), nil
		}
	}
	if err != nil {
		return "", false, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return chk.Key, known, nil, nil
}

// refusedByNode starts a refresh of the routes and policies when a node
// refused, as invalid, a check of a stored policy: the client's copy may
// be stale (the policy changed since the last refresh: its key_by, its
// descriptors), and until the next refresh (RefreshInterval, 5 s by
// default) every such check would fail on it. Refreshes are at least
// minRefreshGap apart, whatever refuses.
func (c *Client) refusedByNode(req *pb.AllowRequest, err error) {
	if req.GetPolicy() != "" && status.Code(err) == codes.InvalidArgument {
		c.kick()
	}
}

// failOpen reports err and whether FailOpen admits the request: the
// cluster could not answer (Unavailable, DeadlineExceeded). A check whose
// caller gave up (caller, its context, canceled or past its deadline) is
// not admitted, and says nothing of the routes: a client that hangs up at
// once, or sends a deadline of a nanosecond, would otherwise pass every
// limit uncounted.
func (c *Client) failOpen(caller context.Context, err error) bool {
	if c.opts.OnError != nil {
		c.opts.OnError(err)
	}
	if caller.Err() != nil {
		return false
	}
	code := status.Code(err)
	if code == codes.Unavailable || code == codes.DeadlineExceeded {
		c.kick()
		return c.opts.FailOpen
	}
	return false
}

// route returns the address of the node that should answer for key: its
// shard's leader when known and reachable, any node otherwise.
func (c *Client) route(key string) string {
	c.mu.RLock()
	var addr string
	if c.shards > 0 {
		g := hashing.ShardOf(key, c.shards)
		if c.table != nil {
			g = int(c.table[g])
		}
		addr = c.leaders[g]
	}
	c.mu.RUnlock()
	if addr != "" && !c.passOver(addr) {
		return addr
	}
	return c.anyAddr()
}

// anyAddr picks a node round-robin, skipping those known to be down or
// stalled (passOver).
func (c *Client) anyAddr() string {
	c.mu.RLock()
	nodes := c.nodes
	c.mu.RUnlock()
	start := int(c.rr.Add(1))
	for i := range nodes {
		addr := nodes[(start+i)%len(nodes)]
		if !c.passOver(addr) {
			return addr
		}
	}
	return nodes[start%len(nodes)]
}

func (c *Client) anyConn() *grpc.ClientConn { return c.conn(c.anyAddr()) }

func (c *Client) conn(addr string) *grpc.ClientConn {
	c.mu.RLock()
	cc := c.conns[addr]
	c.mu.RUnlock()
	if cc != nil {
		return cc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		if c.dead == nil {
			c.dead, _ = grpc.NewClient("passthrough:///closed", grpc.WithTransportCredentials(insecure.NewCredentials()))
			c.dead.Close() // every call on it fails at once (Canceled)
		}
		return c.dead
	}
	if cc = c.conns[addr]; cc == nil {
		opts := append(append(c.security(), deadconn.DialOption(), deadconn.Redial()), c.opts.DialOptions...)
		var err error
		if cc, err = grpc.NewClient(addr, opts...); err != nil {
			cc, _ = grpc.NewClient("passthrough:///invalid", opts...)
		}
		c.conns[addr] = cc
	}
	return cc
}

// security returns the dial options of Options.TLS and Options.Token.
func (c *Client) security() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if c.opts.TLS != nil {
		creds = credentials.NewTLS(c.opts.TLS)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if c.opts.Token != "" {
		tok := []byte(c.opts.Token)
		opts = append(opts, grpc.WithPerRPCCredentials(authz.Bearer(func() []byte { return tok }, c.opts.TLS != nil)))
	}
	return opts
}
