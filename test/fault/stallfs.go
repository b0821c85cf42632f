package fault

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// StallFS is a FUSE filesystem on a node's data directory that passes
// everything through to a directory beside it, and whose fsyncs can be
// held: a disk that hangs rather than fails (a network volume that lost
// its path), which the kernel cannot make by itself without
// device-mapper. It is served by the test process; mounting needs root
// (CAP_SYS_ADMIN and /dev/fuse).
type StallFS struct {
	Dir    string
	server *fuse.Server

	mu   sync.Mutex
	gate chan struct{} // non-nil while held: fsyncs wait for its close
}

// MountStallFS mounts a StallFS on dir, backed by dir+".backing".
func MountStallFS(dir string) (*StallFS, error) {
	backing := dir + ".backing"
	for _, d := range []string{dir, backing} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	loop, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, err
	}
	s := &StallFS{Dir: dir}
	root := &stallNode{LoopbackNode: loop.(*fs.LoopbackNode), fs: s}
	srv, err := fs.Mount(dir, root, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMount: true, // as root, without fusermount
		AllowOther:  true, // the node may run as another user in a namespace
		Name:        "floodgate-stall",
	}})
	if err != nil {
		return nil, fmt.Errorf("mount a stalling filesystem on %s: %w", dir, err)
	}
	s.server = srv
	return s, nil
}

// Hold makes every fsync from now on wait until Release.
func (s *StallFS) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

// Release lets held fsyncs, and later ones, through.
func (s *StallFS) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// Unmount releases held fsyncs and detaches the filesystem.
func (s *StallFS) Unmount() error {
	s.Release()
	return s.server.Unmount()
}

// stallNode is a passed-through file or directory whose fsync waits
// while its filesystem is held.
type stallNode struct {
	*fs.LoopbackNode
	fs *StallFS
}

var (
	_ fs.NodeFsyncer     = (*stallNode)(nil)
	_ fs.NodeWrapChilder = (*stallNode)(nil)
)

// WrapChild makes every file and directory below a stallNode too.
func (n *stallNode) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &stallNode{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

// Fsync waits while the filesystem is held (or until the caller is gone:
// a process that exits interrupts its pending calls), then syncs.
func (n *stallNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	n.fs.mu.Lock()
	gate := n.fs.gate
	n.fs.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return syscall.EINTR
		}
	}
	if s, ok := f.(fs.FileFsyncer); ok {
		return s.Fsync(ctx, flags)
	}
	return 0 // a directory: the backing filesystem's own order suffices here
}
