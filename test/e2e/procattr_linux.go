package e2e

import "syscall"

// dieWithParent makes the kernel kill a node when the process that
// started it dies (a test binary killed by a timeout or by hand), so no
// node outlives its test holding ports and data dirs. The signal fires
// when the starting thread exits; Go keeps its threads for the process's
// life unless a goroutine locked one, which the harness does not.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
