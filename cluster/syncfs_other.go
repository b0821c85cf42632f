//go:build !linux

package cluster

import (
	"errors"
	"os"
)

// haveSyncFS reports whether syncFS works on this system: without
// syncfs(2), stores are synced one by one.
const haveSyncFS = false

func syncFS(*os.File) error { return errors.ErrUnsupported }
