package tlsconf

import (
	"context"
	"maps"
	"slices"
	"time"
)

// ExpiryWarning is how long before a certificate in use expires that
// WatchExpiry starts to warn: time for an operator to renew it by hand
// when its automatic renewal (cert-manager, Vault) has stopped.
const ExpiryWarning = 14 * 24 * time.Hour

// NotAfter is when the certificate in use expires; zero without one.
func (r *Reloader) NotAfter() time.Time {
	if leaf := r.Leaf(); leaf != nil {
		return leaf.NotAfter
	}
	return time.Time{}
}

// WatchExpiry calls warn for each certificate of certs (keyed by the flag
// that names its file) that expires within ExpiryWarning, or has expired:
// at once, then every interval, until ctx ends. The certificate is read
// from its Reloader each time, so the warnings stop once a renewed one is
// in use. A node whose certificate has expired keeps serving it: callers
// that verify it refuse the handshake, and the log and the metric say
// why.
func WatchExpiry(ctx context.Context, every time.Duration, certs map[string]*Reloader, warn func(flag string, notAfter time.Time)) {
	flags := slices.Sorted(maps.Keys(certs))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, flag := range flags {
			at := certs[flag].NotAfter()
			if !at.IsZero() && time.Until(at) < ExpiryWarning {
				warn(flag, at)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
