package tlsconf

import (
	"context"
	"time"

	"github.com/floodgate/floodgate/filewatch"
)

// Watch reloads the files whenever their modification time or size
// changes, looking every interval, until ctx ends. A failed load (say, a
// certificate written before its key, or one that SetCheck's rule
// refuses until another file is rotated too) goes to onError once per
// change of the files, and is tried again at every look until it loads:
// the previous material stays in use meanwhile.
func (r *Reloader) Watch(ctx context.Context, every time.Duration, onError func(error)) {
	seen := func() filewatch.Stamp {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return r.seen
	}
	filewatch.Watch(ctx, every, r.files.paths(), seen, r.Reload, onError)
}

// paths lists the files, "" for those not given.
func (f Files) paths() []string { return []string{f.Cert, f.Key, f.CA} }
