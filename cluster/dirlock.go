package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockFile is the file in a data dir that a running node holds an
// exclusive lock on, as etcd, consul and rqlite do: two processes on one
// data dir would both write its Raft logs, and the second would take the
// first's live bolt files for damaged ones.
const lockFile = "LOCK"

// dirLock is a held data-dir lock. The kernel releases it when the process
// dies, so a kill -9 never leaves a stale lock behind.
type dirLock struct{ f *os.File }

// lockDataDir takes the data dir's lock, or fails at once with
// ErrDataDirInUse naming the process that holds it.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: data-dir: %w", ErrConfig, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = fmt.Sprintf("process %d", pid)
				}
			}
			return nil, fmt.Errorf("%w: data-dir: %s is in use by %s (another floodgate on the same data dir); "+
				"stop it first, or give this node its own --data-dir", ErrDataDirInUse, dir, holder)
		}
		return nil, fmt.Errorf("%w: data-dir: lock %s: %w", ErrConfig, path, err)
	}
	// The pid is informational: the lock, not the file's content, decides.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock; the file stays, so the next start reuses it.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
