// Package policy evaluates a request against a list of limits checked
// together: admitted only when every limit admits, and counted in every
// limit only then. It is pure: states and time are passed in, so the FSM
// can call it while applying a Raft log entry and every replica agrees.
//
// A Policy is what a shard's log entry carries for each check: either the
// single inline limit of a request or a named policy resolved by the leader,
// so applying an entry never depends on anything outside the entry.
package policy
