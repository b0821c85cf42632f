package rpc

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// Config tunes the server.
type Config struct {
	// MaxLogLength caps the limit of a sliding log (window.DefaultMaxLogLength
	// when 0).
	MaxLogLength int64
	// LeaderWait bounds how long a check waits for its shard to have a
	// reachable leader (an election) before answering Unavailable.
	LeaderWait time.Duration
	// MaxChecksWaiting bounds the checks the node's entry points took and
	// have not answered: more are refused at once (ErrOverloaded, see
	// admission). 0: no bound; the flag's default is
	// DefaultMaxChecksWaiting.
	MaxChecksWaiting int64
}

// Server implements the RateLimiter service on a node.
type Server struct {
	pb.UnimplementedRateLimiterServer
	node *cluster.Node
	disp dispatcher
	cfg  Config
}

// NewServer returns the RateLimiter service of node; peers forwards checks.
func NewServer(node *cluster.Node, peers *Peers, cfg Config) *Server {
	if cfg.MaxLogLength == 0 {
		cfg.MaxLogLength = window.DefaultMaxLogLength
	}
	if cfg.LeaderWait == 0 {
		cfg.LeaderWait = 2 * time.Second
	}
	disp := dispatcher{node: node, forward: newForwarder(peers, node).forwardTo, wait: cfg.LeaderWait,
		limit: &admission{max: cfg.MaxChecksWaiting}}
	return &Server{node: node, disp: disp, cfg: cfg}
}

// Allow implements pb.RateLimiterServer.
func (s *Server) Allow(ctx context.Context, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	if err := s.ready(); err != nil {
		return nil, refuse(1, err)
	}
	c, err := s.parseCheck(ctx, req, "", nil)
	if err != nil {
		return nil, refuse(1, err)
	}
	res, errs := s.decide(ctx, []fsm.Check{c})
	if errs[0] != nil {
		return nil, toStatus(errs[0])
	}
	return resultToProto(c, res[0]), nil
}

// maxLog is the cap checks and policies are validated against: own (this
// node's --max-log-length), or less when a member's is less (see
// cluster.Node.MaxLogLength), so every node takes and refuses alike.
// A server without a node (parsing alone, in tests) has only its own.
func maxLog(own int64, node *cluster.Node) int64 {
	if node == nil {
		return own
	}
	return min(own, node.MaxLogLength())
}

// AllowBatch implements pb.RateLimiterServer. Every request is validated
// before anything is counted; then each shard's checks go to its leader in
// one call, all shards at once.
func (s *Server) AllowBatch(ctx context.Context, req *pb.AllowBatchRequest) (*pb.AllowBatchResponse, error) {
	if err := validate.Batch(len(req.Requests)); err != nil {
		return nil, refuse(1, err) // no checks, one bad request: see refuse
	}
	if err := s.ready(); err != nil {
		return nil, refuse(len(req.Requests), err)
	}
	checks, err := s.parseBatch(ctx, req.Requests)
	if err != nil {
		return nil, refuse(len(req.Requests), err)
	}
	res, errs := s.decide(ctx, checks)
	out := &pb.AllowBatchResponse{Results: make([]*pb.AllowBatchItem, len(checks))}
	for i, err := range errs {
		if err != nil {
			out.Results[i] = &pb.AllowBatchItem{Error: &pb.ItemError{Code: uint32(codeOf(err)), Message: err.Error()}}
		} else {
			out.Results[i] = &pb.AllowBatchItem{Response: resultToProto(checks[i], res[i])}
		}
	}
	return out, nil
}

// parseBatch validates every request of a batch, failing on the first bad
// one. Requests with equal inline limits share one policy (validate.Inline).
func (s *Server) parseBatch(ctx context.Context, reqs []*pb.AllowRequest) ([]fsm.Check, error) {
	checks := make([]fsm.Check, len(reqs))
	var inline validate.Inline
	for i, r := range reqs {
		c, err := s.parseCheck(ctx, r, validate.Elem("requests", i), &inline)
		if err != nil {
			return nil, err
		}
		checks[i] = c
	}
	return checks, nil
}

// ready refuses checks until the node is a member that knows its shards:
// a restarting node serves the Peer service (its groups need it) before
// its meta state is loaded, and must not guess where a key lives.
func (s *Server) ready() error {
	if !s.node.Ready() {
		return fmt.Errorf("%w: the node is starting; try another node or again shortly", cluster.ErrNotReady)
	}
	return nil
}
