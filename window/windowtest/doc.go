// Package windowtest holds brute-force reference models of the window
// algorithms and random generators of limits, times and costs, for
// property tests of window and of the packages built on it (policy, fsm).
//
// It is test support only: production code must never import it. The
// models keep the whole history in the most obvious form and compute the
// capacity in use at any time straight from the definitions in package
// window's contract; Check derives every field of a window.Decision from
// that alone, by search, never by the closed forms window uses. They are
// slow (big integers, linear scans) on purpose.
package windowtest
