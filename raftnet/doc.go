// Package raftnet is a node's Raft transport for all of its groups: one
// connection to each peer node carries the RPCs of every group, framed
// and flushed together, instead of hashicorp/raft's NetworkTransport with
// its connections per group and peer (a pool for calls, one per pipeline,
// one for heartbeats) and its msgpack encoding by reflection.
//
// A Network owns the links of a node: the outbound connection to each peer
// (dialed on first use through a stream layer, the node's Raft port mux)
// and the inbound ones peers dialed. Network.Transport gives each Raft
// group its raft.Transport, which names the group in every frame. On the
// receiving side each group's requests on a link are handled in order, one
// at a time, as raft's main loop takes them; heartbeats skip the queue, as
// in NetworkTransport, so a slow disk write never delays them. A snapshot
// travels on a connection of its own.
//
// A group's replication to a peer it cannot reach waits for the peer
// (Transport.Await, await.go) rather than failing at once, so that
// raft's backoff, which grows with each failure, does not hold back a
// peer that returns from a long outage.
//
// A peer that does not speak raftnet (an older release during a rolling
// upgrade) closes the connection at the handshake; the group's transport
// then uses its NetworkTransport for that peer, which also keeps serving
// the old release's inbound connections.
//
// Frames are a 4-byte length, a kind, a call id and a body (codec.go);
// the bodies are raft's RPC structs, encoded by hand.
package raftnet
