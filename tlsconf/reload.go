package tlsconf

import (
	"context"
	"os"
	"time"
)

// stamp is what Watch compares: each file's modification time and size.
type stamp [3]struct {
	mod  time.Time
	size int64
}

func stampOf(f Files) stamp {
	var s stamp
	for i, p := range []string{f.Cert, f.Key, f.CA} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s[i].mod, s[i].size = fi.ModTime(), fi.Size()
		}
	}
	return s
}

// Watch reloads the files whenever their modification time or size
// changes, looking every interval, until ctx ends. A failed load (say, a
// certificate written before its key, or one that SetCheck's rule
// refuses until another file is rotated too) goes to onError once per
// change of the files, and is tried again at every look until it loads:
// the previous material stays in use meanwhile.
func (r *Reloader) Watch(ctx context.Context, every time.Duration, onError func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	var failed stamp
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := stampOf(r.files)
		r.mu.RLock()
		same := st == r.seen
		r.mu.RUnlock()
		if same {
			continue
		}
		if err := r.Reload(); err != nil && st != failed {
			failed = st
			if onError != nil {
				onError(err)
			}
		}
	}
}
