//go:build !linux

package e2e

import "errors"

// LimitFileSize needs Linux's prlimit.
func (n *Node) LimitFileSize(uint64) error { return errors.New("LimitFileSize needs Linux") }
