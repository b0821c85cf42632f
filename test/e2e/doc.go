// Package e2e starts real floodgate clusters (one process per node, on
// loopback) for the end-to-end tests and the cluster benchmark.
package e2e
