package filewatch

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Stamp is what a watch compares: each file's modification time and size,
// and where the system gives them its inode and change time (a file that
// cannot be read stamps empty).
type Stamp string

// Of stamps files ("" entries are skipped).
func Of(files ...string) Stamp {
	var b strings.Builder
	for _, f := range files {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%d:%d%s", fi.ModTime().UnixNano(), fi.Size(), identity(fi))
		}
		b.WriteByte(';')
	}
	return Stamp(b.String())
}

// Watch looks at files every interval until ctx ends, and calls reload
// when their Stamp is not the one seen returns (that of the last load,
// which reload records). A failed reload (a certificate written before
// its key, or one refused until another file is rotated too) goes to
// onError once per change of the files, and is tried again at every look
// until it loads.
func Watch(ctx context.Context, every time.Duration, files []string, seen func() Stamp, reload func() error, onError func(error)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var failed Stamp
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := Of(files...)
		if st == seen() {
			continue
		}
		if err := reload(); err != nil && st != failed {
			failed = st
			if onError != nil {
				onError(err)
			}
		}
	}
}
