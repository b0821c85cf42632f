//go:build !linux

package raftlog

import "os"

// syncFile flushes f to stable storage.
func syncFile(f *os.File) error { return f.Sync() }

// allocateFile is not done here: appends extend the file.
func allocateFile(*os.File, int64, int64) error { return nil }
