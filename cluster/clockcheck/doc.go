// Package clockcheck decides whether a node's clock is too far from its
// cluster's to be trusted: a group leader stamps every check with its
// clock, so a leader whose clock runs ahead slides windows early (and
// admits over the limit), and one that runs behind slides them late.
// It is pure: measurements of the peers' clocks come in, a verdict goes
// out; the node measures and acts (cluster/clockwatch.go).
package clockcheck
