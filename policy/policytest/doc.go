// Package policytest holds a brute-force reference of a whole policy and
// random generators of policies and request sequences, for property tests
// of policy and of the state machines that apply policies (fsm).
//
// It is test support only: production code must never import it. The
// reference restates the policy contract (atomic limits, the reduced limit,
// counting denials, the hard, soft, shadow and elastic modes, stretched
// limits counted as they were checked) on the brute-force models of
// window/windowtest, never on window's algorithms.
package policytest
