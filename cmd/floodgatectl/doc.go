// Command floodgatectl administers a floodgate cluster: status, join,
// leave, named policies, key resets, and checks by hand. --addr picks the
// node to talk to (any node answers); --json prints machine-readable output.
package main
