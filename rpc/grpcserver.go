package rpc

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/metrics"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/deadconn"
)

// maxMessage bounds gRPC messages: a full batch of 1,000 checks with 1 KiB
// keys, with room to spare.
const maxMessage = 16 << 20

// maxExportMessage bounds a slot move's export in one answer
// (Peer.ExportSlots): the state machine's cap, and room for the framing.
// The answers a server sends are bounded by it, and a peer asking for an
// export takes that much (gRPC's own default is 4 MiB: a move of more
// states than that, asked of a peer, failed on every try and never
// finished, its slots refused meanwhile).
const maxExportMessage = fsm.MaxExport + 1<<20

// maxGroupExport bounds a group's states for a backup in one answer
// (Peer.ExportGroup), and so the answers a server sends: a group holds up
// to --max-key-states states (2,000,000 by default), 50-400 bytes each
// exported, and the backup cuts them into records of its own
// (backupRecord). Under it, a save of a group led elsewhere works as one
// of a group led by the node asked.
const maxGroupExport = 1 << 30

// streamWorkers is how many calls run on reused goroutines at once (more
// get a goroutine of their own): a check waits for a commit, so this is
// the concurrency the workers serve, not the CPU count.
const streamWorkers = 256

// NewGRPCServer registers every service of node on a new gRPC server: the
// RateLimiter, Envoy RLS v3, Admin and Peer services, the standard health service and
// reflection. The returned health server starts NOT_SERVING; mark it
// SERVING once the node has joined its cluster. A request that is not
// valid protobuf answers InvalidArgument (see decodeOptions). The
// RateLimiter service is returned too, for the HTTP API to call in-process.
func NewGRPCServer(node *cluster.Node, peers *Peers, cfg Config, opts ...grpc.ServerOption) (*grpc.Server, *health.Server, *Server) {
	opts = append(append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxGroupExport),
		// Handlers run on long-lived workers whose stacks have grown
		// already: a goroutine per call spent a tenth of a node's CPU
		// growing its stack under load.
		grpc.NumStreamWorkers(streamWorkers),
		deadconn.ServerOption(),
		grpc.ChainUnaryInterceptor(metrics.GRPCServer.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(metrics.GRPCServer.StreamServerInterceptor()),
	}, decodeOptions()...), opts...)
	// Chained last, inside opts' (the call rules, cmd/floodgate): a caller
	// is judged by its credentials before its cluster, and only a peer
	// learns this node's cluster from a refusal.
	opts = append(opts, grpc.ChainUnaryInterceptor(admitPeerCalls(node.AdmitPeer)))
	gs := grpc.NewServer(opts...)
	// Named as at the Raft handshake: a restarted member knows its
	// cluster from its data dir before its meta state is replayed.
	peers.NameCluster(node.Cluster)
	srv := NewServer(node, peers, cfg)
	pb.RegisterRateLimiterServer(gs, srv)
	rlsv3.RegisterRateLimitServiceServer(gs, NewRLSServer(srv))
	pb.RegisterAdminServer(gs, NewAdminServer(node, peers, srv.cfg))
	peerv1.RegisterPeerServer(gs, NewPeerServer(node, srv.cfg))
	hs := health.NewServer()
	MarkNotServing(hs)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	metrics.GRPCServer.InitializeMetrics(gs)
	return gs, hs, srv
}

// checkServices are the services whose health the node reports: the
// server as a whole ("") and each service a client checks limits with.
var checkServices = []string{"", pb.RateLimiter_ServiceDesc.ServiceName, rlsv3.RateLimitService_ServiceDesc.ServiceName}

// MarkServing flips the health of the node's services to SERVING.
func MarkServing(hs *health.Server) {
	for _, s := range checkServices {
		hs.SetServingStatus(s, healthpb.HealthCheckResponse_SERVING)
	}
}

// MarkNotServing flips the health of the node's services to NOT_SERVING:
// a node not started yet.
func MarkNotServing(hs *health.Server) {
	for _, s := range checkServices {
		hs.SetServingStatus(s, healthpb.HealthCheckResponse_NOT_SERVING)
	}
}
