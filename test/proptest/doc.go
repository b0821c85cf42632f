// Package proptest sizes the property tests: how many random sequences
// (or seeds) one runs. The rule lives here once: the full number in a
// plain run, a quarter of it (at least one) under the race detector or
// with -short. `make test` runs every package that uses it twice: under
// -race, at a quarter, where the point is the race detector on the code's
// shared state, and again without it at full size, where the point is the
// number of sequences; the race detector makes them 6-9 times slower.
package proptest
