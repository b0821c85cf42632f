//go:build !linux

package deadconn

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not known.
func setUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
