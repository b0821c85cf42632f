package filewatch

import (
	"fmt"
	"os"
	"syscall"
)

// identity is what stamps a file besides its modification time and size:
// its inode and change time (see stat_linux.go).
func identity(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf(":%d:%d.%d", st.Ino, st.Ctimespec.Sec, st.Ctimespec.Nsec)
}
