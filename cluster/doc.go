// Package cluster runs a floodgate node: the meta Raft group (membership
// and shard leadership reports), the shard Raft groups placed on the node,
// memberlist gossip, and the reconcilers that move replicas toward the
// placement.
//
// Keys hash to slots (hashing.ShardOf), which groups own; a group's home
// leads it and its other replicas go to active nodes by rendezvous hashing
// (hashing.Rendezvous) kept to an even share of replicas per node
// (placement.go); a legacy cluster's shards go by rendezvous alone. Every
// group of a node shares one Raft TCP port through Mux, and one log and
// one fsync per flush through the node's raftlog.Store. A shard leader's
// batcher gathers concurrent checks into one log entry (group commit)
// stamped with the leader's clock. The groups heartbeat on one grid of
// instants per node (grid.go, pace.go), so an idle node wakes a few times a
// second whatever the number of its groups.
//
// The package knows Raft but not gRPC: calls to other nodes go through the
// Peers interface, which the rpc package implements.
package cluster
