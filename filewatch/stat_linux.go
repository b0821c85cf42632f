package filewatch

import (
	"fmt"
	"os"
	"syscall"
)

// identity is what stamps a file besides its modification time and size:
// its inode and change time. Only the kernel sets the change time, at
// every write, rename or chmod, so tools that keep modification times
// (tar, rsync -a, cp -p) cannot make a new file look like the old one.
func identity(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf(":%d:%d.%d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
}
