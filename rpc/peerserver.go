package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/wallclock"
)

// PeerServer implements the node-to-node Peer service.
type PeerServer struct {
	peerv1.UnimplementedPeerServer
	node   *cluster.Node
	maxLog int64
}

// NewPeerServer returns the Peer service of node.
func NewPeerServer(node *cluster.Node, cfg Config) *PeerServer {
	return &PeerServer{node: node, maxLog: cfg.MaxLogLength}
}

// Forward implements peerv1.PeerServer: it evaluates each shard's checks
// here and never forwards again, so a check makes at most one hop. A peer
// is validated like a client: an invalid check (its policy, cost, key, or a
// shard that does not own its key) is answered INVALID, naming the field,
// and counted nowhere, while the other checks of the request go ahead. A
// shard's checks go to its group together, split only by how long their
// callers wait (byWait).
func (p *PeerServer) Forward(ctx context.Context, req *peerv1.ForwardRequest) (*peerv1.ForwardResponse, error) {
	received := time.Now() // each check's wait_ms counts from here
	if len(req.Checks) > forwardMaxChecks {
		return nil, toStatus(fmt.Errorf("%w: checks: %d checks is more than %d", ErrInvalid, len(req.Checks), forwardMaxChecks))
	}
	out := &peerv1.ForwardResponse{Results: make([]*peerv1.ForwardResult, len(req.Checks))}
	byShard := map[int][]int{}
	checks := make([]fsm.Check, len(req.Checks))
	// Checks of one shard from one sender usually share a policy: decode
	// and validate each distinct encoding once.
	decoded := map[string]decodedPolicy{}
	caughtUp := false // with the meta leader, at most once per call
	errs := make([]error, len(req.Checks))
	for i, c := range req.Checks {
		d, ok := decoded[string(c.Policy)]
		if !ok {
			d = p.decodePolicy(c.Policy, p.maxLog)
			decoded[string(c.Policy)] = d
		}
		checks[i], errs[i] = p.checkItem(ctx, c, d, validate.Elem("checks", i), &caughtUp)
	}
	forwardSets(req.Checks, checks, errs)
	for i, c := range req.Checks {
		if errs[i] != nil {
			out.Results[i] = forwardResult(nil, 0, errs[i])
			continue
		}
		byShard[int(c.Shard)] = append(byShard[int(c.Shard)], i)
	}
	var wg sync.WaitGroup
	most := longestWait(req.Checks)
	for shard, idx := range byShard {
		for _, g := range byWait(req.Checks, idx) {
			wg.Go(func() {
				gctx, cancel := waitContext(ctx, received, g, most)
				defer cancel()
				sub := make([]fsm.Check, len(g.idx))
				for j, i := range g.idx {
					sub[j] = checks[i]
				}
				res, err := p.node.Submit(gctx, shard, sub)
				for j, i := range g.idx {
					out.Results[i] = forwardResult(res, j, err)
				}
			})
		}
	}
	wg.Wait()
	return out, nil
}

// decodedPolicy is a forwarded policy encoding, decoded and validated;
// err names the field inside the policy.
type decodedPolicy struct {
	p   *policy.Policy
	err error
}

// decodePolicy decodes and validates a forwarded policy under the cap
// maxLog (this node's own --max-log-length for a check's, the cluster's
// for a policy write), exactly as a client's would be.
func (p *PeerServer) decodePolicy(b []byte, maxLog int64) decodedPolicy {
	dp, n, err := policy.Decode(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%w: %d trailing bytes", policy.ErrCorrupt, len(b)-n)
	}
	if err == nil {
		err = dp.Validate(maxLog)
	}
	if err != nil {
		return decodedPolicy{err: err}
	}
	return decodedPolicy{p: &dp}
}

// checkItem validates one forwarded check; field ("checks[3].") prefixes
// the field its error names.
func (p *PeerServer) checkItem(ctx context.Context, c *peerv1.ForwardCheck, d decodedPolicy, field string, caughtUp *bool) (fsm.Check, error) {
	switch {
	case c.Key == "":
		return fsm.Check{}, fmt.Errorf("%w: %skey: must not be empty", ErrInvalid, field)
	case len(c.Key) > validate.MaxStoredKeyLen:
		return fsm.Check{}, fmt.Errorf("%w: %skey: %d bytes is longer than %d", ErrInvalid, field, len(c.Key), validate.MaxStoredKeyLen)
	case d.err != nil:
		return fsm.Check{}, validate.AtField(field+"policy.", d.err)
	}
	if err := validate.StoredKey(c.Key, d.p, field); err != nil {
		return fsm.Check{}, err
	}
	if err := d.p.ValidateCost(c.Cost); err != nil {
		return fsm.Check{}, validate.AtField(field, err)
	}
	if err := p.node.CheckOwnerFresh(ctx, int(c.Shard), c.Key, caughtUp); err != nil {
		if errors.Is(err, cluster.ErrWrongShard) {
			return fsm.Check{}, fmt.Errorf("%w: %sshard: %v", ErrInvalid, field, err)
		}
		return fsm.Check{}, err
	}
	return fsm.Check{Key: c.Key, Policy: d.p, Cost: c.Cost, Joined: c.Joined}, nil
}

// forwardSets checks the atomic sets of a forwarded call (ForwardCheck.
// joined): a set is of one shard and one policy encoding, and a set with
// an invalid check is refused whole, so nothing of it is counted. It sets
// errs of every check of a refused set.
func forwardSets(in []*peerv1.ForwardCheck, checks []fsm.Check, errs []error) {
	for i := 0; i < len(in); {
		j := i + 1
		for j < len(in) && in[j].Joined {
			j++
		}
		var bad error
		switch {
		case in[i].Joined:
			bad = fmt.Errorf("%w: checks[%d].joined: no check before it to join", ErrInvalid, i)
		default:
			for k := i; k < j && bad == nil; k++ {
				switch {
				case errs[k] != nil:
					bad = errs[k]
				case in[k].Shard != in[i].Shard:
					bad = fmt.Errorf("%w: checks[%d].shard: %d, its set's (checks[%d]) is %d", ErrInvalid, k, in[k].Shard, i, in[i].Shard)
				case checks[k].Policy != checks[i].Policy:
					bad = fmt.Errorf("%w: checks[%d].policy: not its set's (checks[%d])", ErrInvalid, k, i)
				}
			}
		}
		if bad != nil && j > i+1 {
			for k := i; k < j; k++ {
				errs[k] = fmt.Errorf("checks[%d..%d], %s: %w", i, j-1, atomicSet, bad)
			}
		} else if bad != nil {
			errs[i] = bad
		}
		i = j
	}
}

// atomicSet names, in a refused check's message, the atomic set it was
// refused with (forwardSets).
const atomicSet = "one atomic set"

// relayedField rewrites the message of a check a peer refused as invalid
// (checkItem, forwardSets) for the client whose check it is. The peer
// names the check by its place in the node-to-node call ("checks[7].policy
// ..." or "checks[6..8], one atomic set: ..."), a call that mixes the
// checks of several clients, so the place means nothing to any of them;
// the client's answer already sits at the check's own place. The field
// inside the check stays ("policy.limits[0].limit.window_ms: ...").
func relayedField(msg string) string {
	msg = strings.TrimPrefix(msg, ErrInvalid.Error()+": ")
	rest, ok := strings.CutPrefix(msg, "checks[")
	if !ok {
		return msg
	}
	place, after, ok := strings.Cut(rest, "]")
	if !ok || strings.Trim(place, "0123456789.") != "" {
		return msg
	}
	if set, ok := strings.CutPrefix(after, ", "+atomicSet+": "); ok {
		return atomicSet + ": " + relayedField(set)
	}
	if field, ok := strings.CutPrefix(after, "."); ok {
		return field
	}
	return msg
}

// forwardResult encodes the j-th result of a shard, or its error: the
// shard's, or the check's own in a partial answer. NOT_LEADER when nothing
// was written, MOVED when the group does not own the key's slot, FULL
// when it holds --max-key-states and BACKLOG when its queue is longer than
// the check's deadline (nothing written either), UNAVAILABLE when the
// outcome is unknown.
func forwardResult(res []policy.Result, j int, err error) *peerv1.ForwardResult {
	var nl *cluster.NotLeaderError
	var pe *cluster.PartialError
	if errors.As(err, &pe) {
		res, err = pe.Results, pe.Errs[j]
	}
	switch {
	case err == nil:
		return &peerv1.ForwardResult{Decision: decisionToProto(res[j])}
	case errors.Is(err, cluster.ErrMoved):
		return &peerv1.ForwardResult{Code: peerv1.ForwardResult_MOVED, Message: err.Error()}
	case errors.Is(err, cluster.ErrFull):
		return &peerv1.ForwardResult{Code: peerv1.ForwardResult_FULL, Message: err.Error()}
	case errors.Is(err, cluster.ErrBacklog):
		return &peerv1.ForwardResult{Code: peerv1.ForwardResult_BACKLOG, Message: err.Error()}
	case codeOf(err) == codes.InvalidArgument:
		return &peerv1.ForwardResult{Code: peerv1.ForwardResult_INVALID, Message: err.Error()}
	case cluster.Retryable(err):
		// Nothing was written: the sender may retry, here or elsewhere.
		r := &peerv1.ForwardResult{Code: peerv1.ForwardResult_NOT_LEADER, Message: err.Error()}
		if errors.As(err, &nl) {
			r.LeaderId, r.LeaderAddr = nl.LeaderID, nl.LeaderAddr
		}
		return r
	}
	return &peerv1.ForwardResult{Code: peerv1.ForwardResult_UNAVAILABLE, Message: err.Error()}
}

// ApplyMeta implements peerv1.PeerServer.
func (p *PeerServer) ApplyMeta(ctx context.Context, req *peerv1.ApplyMetaRequest) (*peerv1.ApplyMetaResponse, error) {
	if err := p.checkMetaPolicies(req.Command); err != nil {
		return nil, toStatus(err)
	}
	if err := p.node.ApplyLocalMeta(ctx, req.Command); err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.ApplyMetaResponse{}, nil
}

// checkMetaPolicies holds the policies of a SetPolicies command a peer
// sends to the cluster's cap (the least --max-log-length of its members),
// as the Admin API holds a client's: the state machine knows only the
// absolute cap. A body that does not decode is left to the node, which
// refuses it as corrupt.
func (p *PeerServer) checkMetaPolicies(cmd []byte) error {
	maxLog := maxLog(p.maxLog, p.node)
	if len(cmd) == 0 || cmd[0] != fsm.MetaSetPolicies {
		return nil
	}
	var c metav1.SetPolicies
	if proto.Unmarshal(cmd[1:], &c) != nil {
		return nil
	}
	for i, b := range c.Policies {
		if d := p.decodePolicy(b, maxLog); d.err != nil {
			return validate.AtField(fmt.Sprintf("policies[%d].", i), d.err)
		}
	}
	return nil
}

// ShardProgress implements peerv1.PeerServer.
func (p *PeerServer) ShardProgress(ctx context.Context, req *peerv1.ShardProgressRequest) (*peerv1.ShardProgressResponse, error) {
	group := int(req.Shard)
	if req.Meta {
		group = -1
	} else if err := p.node.CheckGroup(group); err != nil && !errors.Is(err, cluster.ErrNotReady) {
		// A group just removed (ErrMoved) has no progress to report
		// either. A node that does not know the cluster's groups yet
		// answers for whatever replica it has.
		return nil, toStatus(fmt.Errorf("%w: shard: %w", ErrInvalid, err))
	}
	if err := p.checkMoveQuery(req); err != nil {
		return nil, toStatus(err)
	}
	info := p.node.Progress(group)
	resp := &peerv1.ShardProgressResponse{Present: info.Present, AppliedIndex: info.Applied, LastIndex: info.Last,
		Leader: info.Leader, Servers: info.Servers, Term: info.Term, LastCommand: info.LastCommand}
	if req.Move != 0 {
		resp.MoveFrozen, resp.MoveImported = p.node.MoveApplied(group, req.Move, req.MoveSlots)
		resp.MoveAnswered = true
	}
	return resp, nil
}

// checkMoveQuery checks the move a ShardProgress request asks about: a
// shard's, with its slots ascending and within the cluster's slot count.
func (p *PeerServer) checkMoveQuery(req *peerv1.ShardProgressRequest) error {
	switch {
	case req.Move == 0 && len(req.MoveSlots) > 0:
		return fmt.Errorf("%w: move: required with move_slots", ErrInvalid)
	case req.Move == 0:
		return nil
	case req.Meta:
		return fmt.Errorf("%w: move: the meta group holds no slots", ErrInvalid)
	case len(req.MoveSlots) == 0:
		return fmt.Errorf("%w: move_slots: at least one slot is required", ErrInvalid)
	}
	count := p.node.View().SlotCount
	for i, s := range req.MoveSlots {
		switch {
		case count > 0 && int(s) >= count:
			return fmt.Errorf("%w: move_slots[%d]: slot %d of %d", ErrInvalid, i, s, count)
		case i > 0 && s <= req.MoveSlots[i-1]:
			return fmt.Errorf("%w: move_slots[%d]: slots must be ascending", ErrInvalid, i)
		}
	}
	return nil
}

// Hello implements peerv1.PeerServer.
func (p *PeerServer) Hello(ctx context.Context, req *peerv1.HelloRequest) (*peerv1.HelloResponse, error) {
	v := p.node.View()
	self := v.Node(p.node.ID())
	if self == nil {
		c := p.node.Config()
		self = nodeFromConfig(c)
	}
	return &peerv1.HelloResponse{Node: self, ClusterId: v.ClusterID, Fresh: p.node.Fresh(), Starting: p.node.Starting(),
		UnixNanos: wallclock.Now().UnixNano()}, nil
}

// JoinCluster implements peerv1.PeerServer.
func (p *PeerServer) JoinCluster(ctx context.Context, req *peerv1.JoinClusterRequest) (*peerv1.JoinClusterResponse, error) {
	if len(req.Addrs) == 0 {
		return nil, toStatus(fmt.Errorf("%w: addrs: at least one cluster address is required", ErrInvalid))
	}
	cid, err := p.node.JoinCluster(ctx, req.Addrs)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.JoinClusterResponse{ClusterId: cid}, nil
}

// AddNode implements peerv1.PeerServer.
func (p *PeerServer) AddNode(ctx context.Context, req *peerv1.AddNodeRequest) (*peerv1.AddNodeResponse, error) {
	proof := cluster.GossipProof{Given: req.GossipKey != nil, MAC: req.GossipKey.GetMac()}
	cid, gossip, err := p.node.AddNode(ctx, req.Node, proof)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.AddNodeResponse{ClusterId: cid, GossipAddrs: gossip}, nil
}

// ExportSlots implements peerv1.PeerServer: any replica of the group that
// applied the move's freeze answers; the state machine checks the move and
// its slots (every slot frozen by exactly that move), so a wrong or stale
// request gets FailedPrecondition and reads nothing.
func (p *PeerServer) ExportSlots(ctx context.Context, req *peerv1.ExportSlotsRequest) (*peerv1.ExportSlotsResponse, error) {
	switch {
	case req.Move == 0:
		return nil, toStatus(fmt.Errorf("%w: move: required", ErrInvalid))
	case len(req.Slots) == 0:
		return nil, toStatus(fmt.Errorf("%w: slots: at least one slot is required", ErrInvalid))
	}
	if err := p.node.CheckGroup(int(req.Group)); err != nil {
		return nil, toStatus(fmt.Errorf("group: %w", err))
	}
	b, err := p.node.ExportSlots(int(req.Group), req.Move, req.Slots)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.ExportSlotsResponse{Export: b}, nil
}

// ExportGroup implements peerv1.PeerServer: the receiver must lead the
// group.
func (p *PeerServer) ExportGroup(ctx context.Context, req *peerv1.ExportGroupRequest) (*peerv1.ExportGroupResponse, error) {
	if err := p.node.CheckGroup(int(req.Group)); err != nil {
		return nil, toStatus(fmt.Errorf("group: %w", err))
	}
	b, err := p.node.ExportGroup(ctx, int(req.Group))
	if err != nil {
		return nil, toStatus(err)
	}
	if len(b) > maxGroupExport-1<<20 {
		return nil, status.Errorf(codes.ResourceExhausted, "group %d: its states are %d bytes, more than a node sends another in one answer (%d): save the backup through this node (floodgatectl --addr), which leads the group",
			req.Group, len(b), maxGroupExport-1<<20)
	}
	return &peerv1.ExportGroupResponse{States: b}, nil
}

// RestoreGroup implements peerv1.PeerServer: the receiver must lead the
// group, and checks the states' keys against its own slot table.
func (p *PeerServer) RestoreGroup(ctx context.Context, req *peerv1.RestoreGroupRequest) (*peerv1.RestoreGroupResponse, error) {
	if err := p.node.CheckGroup(int(req.Group)); err != nil {
		return nil, toStatus(fmt.Errorf("group: %w", err))
	}
	if _, err := p.node.RestoreGroup(ctx, int(req.Group), req.States); err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.RestoreGroupResponse{}, nil
}

// ResetKey implements peerv1.PeerServer: the receiver must lead the shard.
func (p *PeerServer) ResetKey(ctx context.Context, req *peerv1.PeerResetRequest) (*peerv1.PeerResetResponse, error) {
	d := p.decodePolicy(req.Policy, p.maxLog)
	caughtUp := false
	if _, err := p.checkItem(ctx, &peerv1.ForwardCheck{Shard: req.Shard, Key: req.Key}, d, "", &caughtUp); err != nil {
		return nil, toStatus(err)
	}
	n, err := p.node.ResetKey(ctx, int(req.Shard), req.Key, d.p)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.PeerResetResponse{States: int32(n)}, nil
}
