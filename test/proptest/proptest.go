package proptest

import "testing"

// divisor is how much smaller a property test runs under the race
// detector or with -short.
const divisor = 4

// Runs returns how many sequences a property test whose full size is n
// runs in this build: n in a plain run, n/4 (at least 1) under -race or
// -short.
func Runs(n int) int {
	if !Race && !testing.Short() {
		return n
	}
	return max(1, n/divisor)
}
