// Package fsm holds floodgate's Raft state machines: Shard, the per-key
// limit states of one shard, and Meta, the cluster's membership and shard
// leadership reports.
//
// Log entries are a type byte followed by an encoded body (consul style).
// Both machines are deterministic: time comes only from timestamps the
// leader writes into entries, never from the clock, so every replica that
// applies the same log holds the same state and writes byte-identical
// snapshots. Snapshots are versioned; Restore builds fresh state and swaps
// it in only when the whole snapshot decoded.
package fsm
