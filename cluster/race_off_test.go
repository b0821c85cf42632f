//go:build !race

package cluster_test

// raceDetector reports whether the tests run under -race.
const raceDetector = false
