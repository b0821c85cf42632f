//go:build race

package proptest

// Race reports whether the race detector is built in.
const Race = true
