// Package rpc is floodgate's gRPC layer: the public RateLimiter and Admin
// services, the node-to-node Peer service, forwarding of checks to shard
// leaders (batched per peer, one hop at most), and the mapping of errors to
// gRPC codes. The Go client SDK is the subpackage client.
package rpc
