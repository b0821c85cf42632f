// Package metrics holds every Prometheus metric floodgate exports, in one
// place, so their names and labels are decided once: the packages that
// observe them (rpc, cluster, raftlog) update these, and the node serves
// Registry on its HTTP address at /metrics.
//
// Names follow what users of envoyproxy/ratelimit, Gubernator and etcd
// know: counters end in _total, durations are seconds, and nothing is
// labelled by key (keys are unbounded). Registry also carries the Go
// runtime and process collectors, the gRPC server's metrics
// (grpc_server_handled_total, grpc_server_handling_seconds), and what
// hashicorp/raft and memberlist emit through go-metrics (raft_*,
// memberlist_*), bridged by Bridge.
package metrics
