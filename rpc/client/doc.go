// Package client is floodgate's Go SDK. It asks the cluster where each
// shard's leader is and sends every check straight there, so no node has to
// forward it; any node still answers if the routing is stale. When the
// cluster cannot answer, the client fails closed (an error) or, with
// FailOpen, admits the request and reports the failure to OnError.
package client
