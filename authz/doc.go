// Package authz decides who may call what on a node's client port.
//
// A node serves three kinds of callers on one gRPC port: services that
// check limits (RateLimiter, Envoy RLS, health and the read-only Admin
// calls the SDK routes with), operators (the Admin calls that change the
// cluster) and the other nodes (the Peer service, which writes raw meta
// commands and moves counts). Once a credential of a role is configured,
// every call of that role must carry one: a node proves it is one by the
// shared peer token or a certificate from the peer CA, an operator by the
// admin token or a client certificate named in the admin list. With
// nothing configured (a development node on loopback) every call is
// allowed, as before. The daemon refuses Admin closed with Peer open: the
// Peer service can do all an operator can.
package authz
