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

// NotAfter is when the chain in use stops verifying: the earliest end of
// its certificates (an intermediate may end before the leaf); zero
// without a certificate.
func (r *Reloader) NotAfter() time.Time { return r.get().notAfter }

// CANotAfter is when the last CA of the bundle in use expires, after
// which no certificate chains to it; zero without a bundle.
func (r *Reloader) CANotAfter() time.Time { return r.get().caNotAfter }

// WatchExpiry calls warn for each certificate of certs (keyed by the flag
// that names its file, read by its function: a Reloader's NotAfter or
// CANotAfter) that expires within ExpiryWarning, or has expired: at once,
// then every interval, until ctx ends. It is read again each time, so the
// warnings stop once a renewed one is in use. A node whose certificate has expired keeps serving it: callers
// that verify it refuse the handshake, and the log and the metric say
// why.
func WatchExpiry(ctx context.Context, every time.Duration, certs map[string]func() time.Time, warn func(flag string, notAfter time.Time)) {
	flags := slices.Sorted(maps.Keys(certs))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, flag := range flags {
			at := certs[flag]()
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
