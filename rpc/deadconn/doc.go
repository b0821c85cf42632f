// Package deadconn gives up on TCP connections whose peer stopped
// acknowledging what was sent to it (TCP_USER_TIMEOUT, set through gRPC's
// keepalive timeout), on a node's gRPC server, on its connections to
// peers and on the Go SDK's connections.
//
// Behind a cut (a link down, a one-way drop, a peer's network stuck) TCP
// backs its retransmissions off: after ten seconds the next one may come
// seconds after the cut heals, and every call on the connection waits for
// it. A connection dropped during the cut is dialed again, and gets
// through as soon as the network does: Redial keeps gRPC from backing its
// attempts off beyond a second.
package deadconn
