package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// joinTimeout bounds the whole join handshake of a new node.
const joinTimeout = 60 * time.Second

// AdminServer implements the Admin service.
type AdminServer struct {
	pb.UnimplementedAdminServer
	node  *cluster.Node
	peers *Peers
	cfg   Config
}

// NewAdminServer returns the Admin service of node.
func NewAdminServer(node *cluster.Node, peers *Peers, cfg Config) *AdminServer {
	return &AdminServer{node: node, peers: peers, cfg: cfg}
}

// Status implements pb.AdminServer.
func (a *AdminServer) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	st := a.node.Status()
	out := &pb.StatusResponse{
		ClusterId: st.ClusterID, NodeId: st.NodeID, Shards: int32(st.Shards),
		Replicas: int32(st.Replicas), MetaLeader: st.MetaLeader,
		Slots: int32(st.Slots), Epoch: st.Epoch, Moves: int32(st.Moves), SlotsToMove: int32(st.ToMove), SlotTable: slotRuns(st.Table),
	}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, &pb.NodeStatus{
			Id: n.Node.Id, GrpcAddr: n.Node.GrpcAddr, HttpAddr: n.Node.HttpAddr, RaftAddr: n.Node.RaftAddr,
			GossipAddr: n.Node.GossipAddr, Region: n.Node.Region, State: stateName(n.Node.State),
			Health: n.Health, MetaVoter: n.MetaVoter, Replicas: int32(n.Replicas), Leaders: int32(n.Leaders),
			Version: n.Node.Version,
		})
	}
	for _, s := range st.ShardInfo {
		ss := &pb.ShardStatus{Id: int32(s.ID), Desired: s.Desired, Leader: s.Leader, Term: s.Term,
			Slots: int32(s.Slots), Home: s.Home, Retiring: s.Retiring}
		for _, r := range s.Replicas {
			suffrage := "nonvoter"
			if r.Voter {
				suffrage = "voter"
			}
			ss.Replicas = append(ss.Replicas, &pb.Replica{NodeId: r.NodeId, Suffrage: suffrage})
		}
		out.ShardStatus = append(out.ShardStatus, ss)
	}
	return out, nil
}

// slotRuns writes a slot table as runs of slots of one group.
func slotRuns(table []uint32) []*pb.SlotRun {
	var out []*pb.SlotRun
	for s, g := range table {
		if n := len(out); n > 0 && out[n-1].Group == int32(g) {
			out[n-1].Count++
			continue
		}
		out = append(out, &pb.SlotRun{First: int32(s), Count: 1, Group: int32(g)})
	}
	return out
}

// Join implements pb.AdminServer: it asks the node at node_addr who it is,
// checks it is fresh, and tells it to join this node's cluster.
func (a *AdminServer) Join(ctx context.Context, req *pb.JoinRequest) (*pb.JoinResponse, error) {
	if req.NodeAddr == "" {
		return nil, toStatus(fmt.Errorf("%w: node_addr: required", ErrInvalid))
	}
	if err := cluster.CheckAddr("node_addr", req.NodeAddr); err != nil {
		return nil, toStatus(err) // never dialed: a typo is not an outage
	}
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	client := peerv1.NewPeerClient(a.peers.conn(req.NodeAddr))
	member := func(id string) bool { return a.node.View().Node(id) != nil }
	hello, err := helloStarted(ctx, client, req.NodeAddr, a.node.View().ClusterID, member)
	if err != nil {
		return nil, toStatus(peerRefusal(req.NodeAddr, err))
	}
	v := a.node.View()
	if (hello.ClusterId == v.ClusterID || hello.Starting) && v.Node(hello.Node.GetId()) != nil {
		// A member already (one still starting is resuming it).
		return &pb.JoinResponse{NodeId: hello.Node.GetId(), ClusterId: v.ClusterID}, nil
	}
	if !hello.Fresh {
		return nil, toStatus(fmt.Errorf("%w: node %s at %s belongs to cluster %s with other members",
			cluster.ErrNotFresh, hello.Node.GetId(), req.NodeAddr, hello.ClusterId))
	}
	if v.Node(hello.Node.GetId()) != nil {
		return nil, toStatus(fmt.Errorf("%w: node_addr: a member named %s already exists", ErrInvalid, hello.Node.GetId()))
	}
	addrs := []string{a.node.Config().GRPCAddr}
	for _, m := range v.Nodes {
		if m.Id != a.node.ID() && m.State == metav1.NodeState_NODE_STATE_ACTIVE {
			addrs = append(addrs, m.GrpcAddr)
		}
	}
	resp, err := client.JoinCluster(ctx, &peerv1.JoinClusterRequest{Addrs: addrs})
	if err != nil {
		return nil, err
	}
	return &pb.JoinResponse{NodeId: hello.Node.GetId(), ClusterId: resp.ClusterId}, nil
}

// helloStarted asks the node at addr who it is, waiting up to
// startingWait for it to finish starting: a node that creates its cluster
// is up in moments, and one joining this cluster (ours: its id) through
// its own --join is then a member (member says so: the node is answered
// at once). One still starting after that cannot be told to join, and is
// refused at once rather than at the join's deadline; the advice to start
// it afresh is only for a node of no cluster or another one, never for
// one resuming this cluster (its data would go).
func helloStarted(ctx context.Context, client peerv1.PeerClient, addr, ours string, member func(id string) bool) (*peerv1.HelloResponse, error) {
	wait, cancel := context.WithTimeout(ctx, startingWait)
	defer cancel()
	for {
		hello, err := client.Hello(ctx, &peerv1.HelloRequest{})
		if err != nil {
			// Unavailable (try again), about the node named, not the cluster.
			return nil, status.Errorf(codes.Unavailable, "node_addr: cannot reach the node at %s: %v", addr, err)
		}
		if !hello.Starting || member(hello.Node.GetId()) {
			return hello, nil
		}
		select {
		case <-wait.Done():
			if ours != "" && hello.ClusterId == ours {
				return nil, fmt.Errorf("%w: node_addr: node %s at %s is still resuming its membership of this cluster after %s: wait for it to come up",
					cluster.ErrNotReady, hello.Node.GetId(), addr, startingWait)
			}
			return nil, fmt.Errorf("%w: node_addr: node %s at %s is still starting (joining the cluster of its own --join, or resuming its data dir) after %s: "+
				"it joins nothing else until it is up; to add it with floodgatectl join, start it with an empty --data-dir and no --join",
				cluster.ErrNotFresh, hello.Node.GetId(), addr, startingWait)
		case <-time.After(startingPoll):
		}
	}
}

// startingWait is how long Join waits for a node that is still starting;
// startingPoll how often it asks.
const (
	startingWait = 5 * time.Second
	startingPoll = 200 * time.Millisecond
)

// Leave implements pb.AdminServer.
func (a *AdminServer) Leave(ctx context.Context, req *pb.LeaveRequest) (*pb.LeaveResponse, error) {
	id := req.NodeId
	if id == "" {
		id = a.node.ID()
	} else if err := cluster.CheckNodeID("node_id", id); err != nil {
		return nil, toStatus(err)
	}
	if err := a.node.Leave(ctx, id); err != nil {
		if errors.Is(err, cluster.ErrUnknownNode) || errors.Is(err, fsm.ErrUnknownNode) || errors.Is(err, fsm.ErrRefused) {
			err = fmt.Errorf("node_id: %w", err) // about the node named, not the cluster
		}
		return nil, toStatus(err)
	}
	return &pb.LeaveResponse{NodeId: id}, nil
}

func stateName(s metav1.NodeState) string {
	switch s {
	case metav1.NodeState_NODE_STATE_ACTIVE:
		return "active"
	case metav1.NodeState_NODE_STATE_LEAVING:
		return "leaving"
	case metav1.NodeState_NODE_STATE_DEAD:
		return "dead"
	}
	return "unknown"
}

func nodeFromConfig(c cluster.Config) *metav1.Node {
	return &metav1.Node{Id: c.NodeID, GrpcAddr: c.GRPCAddr, HttpAddr: c.HTTPAddr, RaftAddr: c.RaftAddr, GossipAddr: c.GossipAddr, Region: c.Region}
}
