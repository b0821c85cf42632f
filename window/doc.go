// Package window holds floodgate's rate-limit algorithms: sliding log,
// sliding counter (plain and weighted), fixed window (rolling or calendar
// aligned), token bucket and GCRA.
//
// The package is pure arithmetic on per-key States. It knows nothing of
// Raft, gRPC or storage, and it never reads the clock: every call is given
// the time (Unix nanoseconds) by its caller, which for floodgate is the
// timestamp the Raft leader wrote into the log entry. Every decision uses
// integer arithmetic only (128-bit intermediates where products can
// overflow, no floating point), so every replica that applies the same
// entries reaches bit-identical states and answers, on any architecture.
//
// A State is 24 bytes. The counter algorithms keep everything in its two
// integers; the sliding log and the sliding counters hang a small buffer off
// it, sized to what the key actually uses. AppendState and DecodeState give
// States a canonical, compact encoding for snapshots.
package window
