// Command bench measures floodgate on this machine against the targets of
// issue 7, in one run, and prints a Markdown table to paste into the
// README. `make bench` runs it. In order:
//
//   - the client's ceiling: ghz against a stub server in this process,
//     its health check and an Allow that does nothing;
//   - a 3-node cluster of real bin/floodgate processes with default flags
//     (through test/e2e): its idle CPU and raft TCP connections;
//   - with ghz (a third-party load tool that does not route to leaders)
//     against one node: the bare gRPC health check, the reference of every
//     ratio, then single strict Allow (inline sliding log and token
//     bucket), single fast Allow, AllowBatch strict and fast, and strict and
//     fast at a held rate;
//   - the same workloads through the Go SDK (rpc/client), which sends each
//     check to its shard's leader, against its own health reference;
//   - single Allow per algorithm and consistency through the SDK;
//   - leader failover: kill -9 of a node under light load, until its
//     shards answer again;
//   - a 5-node cluster: health and single strict Allow, normalised by
//     health and compared with the 3-node figure;
//   - the Go benchmarks of window/ and fsm/, of which BenchmarkStateMemory
//     gives the memory per key.
//
// The ghz, SDK, ceiling and 5-node comparisons run in rounds (rounds.go):
// each round measures the health check and then every workload once. Each
// figure is printed with its ratio to the health check of its own round,
// from the round whose figure is the median, with the spread of all
// rounds, and the target, marked met or not met. --quick runs one
// round and shortens every phase. Machine load changes absolute numbers:
// compare ratios.
package main
