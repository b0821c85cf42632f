package e2e

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// LimitFileSize caps the size of the files the running process writes
// (RLIMIT_FSIZE): a write past bytes fails with EFBIG, as on a full disk,
// without a filesystem of that size (which needs root to mount).
func (n *Node) LimitFileSize(bytes uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s not running", n.ID)
	}
	lim := unix.Rlimit{Cur: bytes, Max: bytes}
	return unix.Prlimit(n.cmd.Process.Pid, unix.RLIMIT_FSIZE, &lim, nil)
}
