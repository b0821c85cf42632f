package raftlog

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFile flushes f's data and its size, not its timestamps: an append
// needs no more, and fdatasync skips an inode write fsync would add.
func syncFile(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// allocateFile allocates n bytes of f at off (zeros when read), extending
// its size.
func allocateFile(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		if err != unix.EINTR {
			return err
		}
	}
}
