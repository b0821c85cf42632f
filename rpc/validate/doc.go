// Package validate checks requests before anything is counted, naming the
// field at fault. Servers and the Go SDK share it, so a client learns of a
// bad request without a round trip, and never admits one by failing open.
// It imports no Raft or gRPC code.
package validate
