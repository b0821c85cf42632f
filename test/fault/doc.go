// Package fault is floodgate's fault-injection suite (issue 6): black-box
// tests that run a three-node cluster of real processes (started with the
// test/e2e harness), send recorded checks on a few hot keys through the Go
// SDK and through raw gRPC clients pinned to each node, inject faults
// (kill -9, SIGSTOP, a network partition in namespaces, a whole-cluster
// crash, leadership hand-offs, membership changes, a full, read-only or
// hung disk) and then check the history:
//
//   - each key's history is linearizable against a counter model
//     (porcupine; calls that failed may or may not have counted);
//   - no key is admitted above its limit (fast mode: within its documented
//     bound per failover);
//   - the count left at the end is what was admitted plus some of the
//     failed calls;
//   - how long the hot shard took to answer again after each fault.
//
// Run it with `make fault`, or one scenario at a time with
// `go test -run 'TestFault/kill-leader' -v ./test/fault/`. The partition
// and disk scenarios need root (network namespaces, tmpfs and FUSE mounts) and are
// skipped without it. The test log ends with a Markdown summary table.
package fault
