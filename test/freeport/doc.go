// Package freeport finds loopback ports for test nodes to listen on. A
// port the kernel hands out for ":0" comes from the ephemeral range, the
// same range it takes source ports of outgoing connections from: between
// the test closing it and the node binding it, any connection may take
// it ("address already in use"). Ports below that range are never taken
// that way, so this picks them, free for both TCP and UDP (memberlist
// needs both).
package freeport
