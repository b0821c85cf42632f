package fault

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Disk is a small tmpfs mounted on a node's data directory: filling it is
// a full disk, remounting it read-only is a read-only disk. Mounting needs
// root (CAP_SYS_ADMIN).
type Disk struct {
	Dir string
}

// MountDisk mounts a tmpfs of size (as mount's size= option: "64m") on dir.
func MountDisk(dir, size string) (*Disk, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := mount("-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir); err != nil {
		return nil, err
	}
	return &Disk{Dir: dir}, nil
}

// fillName is the file that takes the free space; it is outside the
// node's own layout so removing it frees exactly what it took.
const fillName = "fault-filler"

// Fill writes one file until the filesystem is full (ENOSPC). The last
// blocks go too: small writes take what large ones leave.
func (d *Disk) Fill() error {
	f, err := os.OpenFile(filepath.Join(d.Dir, fillName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, size := range []int{1 << 20, 4096, 1} {
		buf := bytes.Repeat([]byte{0xfa}, size)
		for {
			if _, err := f.Write(buf); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					break
				}
				return err
			}
		}
	}
	return nil
}

// Free removes what Fill wrote.
func (d *Disk) Free() error { return os.Remove(filepath.Join(d.Dir, fillName)) }

// ReadOnly remounts the filesystem read-only (ro true) or read-write.
func (d *Disk) ReadOnly(ro bool) error {
	opt := "remount,rw"
	if ro {
		opt = "remount,ro"
	}
	return mount("-o", opt, d.Dir)
}

// Unmount detaches the filesystem (lazily, in case a process still has a
// file open there).
func (d *Disk) Unmount() error {
	if out, err := exec.Command("umount", "-l", d.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("umount %s: %v: %s", d.Dir, err, out)
	}
	return nil
}

func mount(args ...string) error {
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("mount %v: %v: %s", args, err, out)
	}
	return nil
}
