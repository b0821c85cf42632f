package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
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
}

// Server implements the RateLimiter service on a node.
type Server struct {
	pb.UnimplementedRateLimiterServer
	node *cluster.Node
	fwd  *forwarder
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
	return &Server{node: node, fwd: newForwarder(peers), cfg: cfg}
}

// Allow implements pb.RateLimiterServer.
func (s *Server) Allow(ctx context.Context, req *pb.AllowRequest) (*pb.AllowResponse, error) {
	if err := s.ready(); err != nil {
		return nil, toStatus(err)
	}
	c, err := s.parseCheck(ctx, req, "")
	if err != nil {
		return nil, toStatus(err)
	}
	shard, err := s.node.ShardOf(c.Key)
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := s.evaluate(ctx, shard, []fsm.Check{c})
	if err != nil {
		return nil, toStatus(err)
	}
	return resultToProto(c, res[0]), nil
}

// AllowBatch implements pb.RateLimiterServer. Every request is validated
// before anything is counted; then each shard's checks go to its leader in
// one call, all shards at once.
func (s *Server) AllowBatch(ctx context.Context, req *pb.AllowBatchRequest) (*pb.AllowBatchResponse, error) {
	if err := validate.Batch(len(req.Requests)); err != nil {
		return nil, toStatus(err)
	}
	if err := s.ready(); err != nil {
		return nil, toStatus(err)
	}
	checks := make([]fsm.Check, len(req.Requests))
	byShard := map[int][]int{}
	for i, r := range req.Requests {
		c, err := s.parseCheck(ctx, r, fmt.Sprintf("requests[%d].", i))
		if err != nil {
			return nil, toStatus(err)
		}
		checks[i] = c
		shard, err := s.node.ShardOf(c.Key)
		if err != nil {
			return nil, toStatus(err)
		}
		byShard[shard] = append(byShard[shard], i)
	}
	out := &pb.AllowBatchResponse{Results: make([]*pb.AllowBatchItem, len(checks))}
	var wg sync.WaitGroup
	for shard, idx := range byShard {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := make([]fsm.Check, len(idx))
			for j, i := range idx {
				sub[j] = checks[i]
			}
			res, err := s.evaluate(ctx, shard, sub)
			var pe *partialError
			if errors.As(err, &pe) {
				res, err = pe.results, nil
			}
			for j, i := range idx {
				ierr := err
				if pe != nil && pe.errs[j] != nil {
					ierr = pe.errs[j]
				}
				if ierr != nil {
					out.Results[i] = &pb.AllowBatchItem{Error: &pb.ItemError{Code: uint32(codeOf(ierr)), Message: ierr.Error()}}
				} else {
					out.Results[i] = &pb.AllowBatchItem{Response: resultToProto(checks[i], res[j])}
				}
			}
		}()
	}
	wg.Wait()
	return out, nil
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

// evaluate answers checks of one shard on its leader, this node or a peer,
// within LeaderWait. A check is never counted twice: only what was
// written nowhere is retried (onLeader).
func (s *Server) evaluate(ctx context.Context, shard int, checks []fsm.Check) ([]policy.Result, error) {
	var res []policy.Result
	err := onLeader(ctx, s.node, shard, s.cfg.LeaderWait, false, func(ctx context.Context, rt cluster.Route) error {
		var err error
		if rt.Local {
			res, err = s.node.Submit(ctx, shard, checks)
		} else {
			res, err = s.fwd.forward(ctx, rt.Addr, shard, checks)
		}
		return err
	})
	return res, err
}
