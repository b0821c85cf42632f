// Package inproc runs floodgate nodes inside a test process: each with its
// own data dir, Raft port, gossip and gRPC server, like a process of the
// daemon but sharing the test's address space (rqlite-style system tests).
package inproc
