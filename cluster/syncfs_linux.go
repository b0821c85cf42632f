package cluster

import (
	"os"

	"golang.org/x/sys/unix"
)

// haveSyncFS reports whether syncFS works on this system.
const haveSyncFS = true

// syncFS flushes every dirty page of the filesystem holding f: one call
// makes all of the node's Raft stores durable at once.
func syncFS(f *os.File) error {
	return unix.Syncfs(int(f.Fd()))
}
