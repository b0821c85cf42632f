// Package e2e starts real floodgate clusters (one process per node, on
// loopback) for the end-to-end tests and the cluster benchmark.
//
// Most tests call t.Parallel: each has its own ports (freeport never hands
// one out twice in a process), data dirs and pod subnet, and they spend
// most of their time waiting on the nodes, so make test runs them four at
// a time (-parallel 4: the package took 291 s with none parallel, 211 s
// at two, 172 s at four, on 2 cores that it kept about a third busy). Tests that measure how soon something
// happens (a failover served again, a paused or skewed node noticed, a
// join refused) or set the environment run alone, before the others, so
// that another test's load cannot stretch what they time.
package e2e
