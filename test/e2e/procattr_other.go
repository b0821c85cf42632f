//go:build !linux

package e2e

import "syscall"

// dieWithParent is Linux only (Pdeathsig); elsewhere a node outlives a
// killed test binary.
func dieWithParent() *syscall.SysProcAttr { return nil }
