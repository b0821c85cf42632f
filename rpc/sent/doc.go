// Package sent tells whether a gRPC call that failed ever reached its
// server: the one rule by which the Go SDK sends a check to another node
// and a node routes a forward again, since a call that never left its
// caller counted nothing. It depends on gRPC alone.
package sent
