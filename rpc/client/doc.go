// Package client is floodgate's Go SDK. It asks the cluster where each
// shard's leader is and sends every check straight there, so no node has to
// forward it; any node still answers if the routing is stale, and a check
// that could not reach its node (down: no connection could be made) goes
// to another, while one that reached a node is never sent again (it may
// have counted). Concurrent single checks bound for one node share calls
// under load (coalesce.go): each is still answered alone, but a busy node
// serves a few large calls instead of many small ones
// (Options.NoCoalescing turns it off). When the cluster cannot answer, the
// client fails closed (an error) or, with FailOpen, admits the request and
// reports the failure to OnError.
package client
