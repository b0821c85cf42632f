// Package slots plans how the fixed slots of the key space are spread over
// the cluster's Raft groups (docs/design/slots.md): a key hashes to one of
// SlotCount slots, every slot is owned by exactly one group, and when the
// set of groups changes (a node joins or leaves) slots move so that every
// group of the target set owns as many as any other, within one, moving as
// few slots as possible and only a bounded batch at a time.
//
// It is pure: no Raft, no gRPC, no clock, no randomness. The meta leader is
// meant to run Plan on every meta change and start the moves NextBatch
// returns; every node computing the same inputs gets the same answer.
//
// Not wired yet: nothing in floodgate calls this package. It waits for the
// meta state's slot table, the shard FSM's ownership record and the move
// protocol described in the design.
package slots
