//go:build !linux

package raftlog

import "os"

// syncFile flushes f to stable storage.
func syncFile(f *os.File) error { return f.Sync() }
