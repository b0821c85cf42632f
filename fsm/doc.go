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
//
// # Entries this binary cannot read
//
// An entry of an unknown type, or a shard entry whose body version is
// newer than this binary knows, stops the node: Apply panics with an
// error wrapping ErrUnknownEntry that names the group, the log index, the
// type (and version) and asks "written by a newer floodgate?", as consul
// does. Only a newer node writes such entries, and the replicas that
// understand them apply them; skipping would leave this one silently
// diverged, answering from counts that are wrong from then on. Upgrade the
// binary and restart: the entry is still in the log.
//
// A corrupt body of a known type and version is different: it is refused
// with an error wrapping ErrCorrupt, changing nothing. Every replica runs
// the same decoder on the same bytes and refuses it identically, so they
// stay identical, and the refusal reaches whoever proposed the entry. A
// format change must therefore bump the body version (or add a type),
// never reuse bytes an older binary would read as something else: a
// cmdHits body is version 2 only when a hit carries Elastic, which older
// binaries cannot replay.
package fsm
