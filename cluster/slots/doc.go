// Package slots plans how the fixed slots of the key space are spread over
// the cluster's Raft groups (docs/design/slots.md): a key hashes to one of
// SlotCount slots, every slot is owned by exactly one group, and when the
// set of groups changes (a node joins or leaves) slots move so that every
// group of the target set owns as many as any other, within one, moving as
// few slots as possible and only a bounded batch at a time.
//
// Two planners, both pure: PlanGroups keeps the group set following the
// nodes (every active node home to the same number of groups; groups of
// departed nodes rehomed, or retired and removed once drained), and Plan
// with NextBatch moves slots toward the target set that Target derives
// from it. No Raft, no gRPC, no clock, no randomness: every node computing
// the same inputs gets the same answer. The meta leader's reconciler
// (package cluster) runs them on every meta change, PlanGroups first, and
// writes one change at a time.
package slots
