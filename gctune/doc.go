// Package gctune sets the garbage collector's target from the live heap,
// so that a node with a small heap (a rate limiter's, tens of MiB) does
// not collect every few megabytes of garbage: Go's default (GOGC=100)
// collects each time the heap doubles, which for a 30 MiB heap under a
// strict load is dozens of times a second, shrinking and regrowing the
// stacks of the goroutines that serve calls each time. The collector is
// given headroom instead: the heap may grow by at least Headroom bytes
// before a collection, and never by less than Go's default would allow.
package gctune
