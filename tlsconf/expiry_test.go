package tlsconf

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A certificate is warned of daily from ExpiryWarning before it expires,
// and after; a renewed one ends the warnings; a CA bundle alone (no
// certificate) is never warned of.
func TestWatchExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Issued inside the bubble: valid for a year of its fake time.
		dir := t.TempDir()
		ca, err := NewCA("cluster")
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := ca.Issue(dir, "node", "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		caFile, err := ca.WriteCA(dir, "ca")
		if err != nil {
			t.Fatal(err)
		}
		node := reloader(t, Files{Cert: cert, Key: key})
		bundle := reloader(t, Files{CA: caFile})
		expires := node.NotAfter()
		if !bundle.NotAfter().IsZero() {
			t.Fatalf("a CA bundle's NotAfter: %v", bundle.NotAfter())
		}
		type warning struct {
			flag string
			at   time.Time
		}
		var mu sync.Mutex // the race detector sees no order in fake time's wakeups
		var warned []warning
		got := func() []warning {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(warned)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			WatchExpiry(ctx, 24*time.Hour, map[string]*Reloader{"tls-cert": node, "tls-client-ca": bundle}, func(flag string, at time.Time) {
				mu.Lock()
				warned = append(warned, warning{flag, at})
				mu.Unlock()
			})
			close(done)
		}()
		start := time.Now()
		// Days run from the start; the first warning comes on the first
		// day less than ExpiryWarning before the end.
		firstDay := int((expires.Sub(start)-ExpiryWarning).Hours()/24) + 1
		time.Sleep(time.Duration(firstDay-1)*24*time.Hour + time.Hour)
		synctest.Wait()
		if w := got(); len(w) != 0 {
			t.Fatalf("warned %d times %s before the end: %v", len(w), time.Until(expires), w[0])
		}
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if w := got(); len(w) != 1 || w[0] != (warning{"tls-cert", expires}) {
			t.Fatalf("%s before the end: warnings %v", time.Until(expires), w)
		}
		time.Sleep(30 * 24 * time.Hour) // 14 more days before, 16 after
		synctest.Wait()
		if n := len(got()); n != 31 {
			t.Fatalf("%d warnings over the 30 days around the end, want one a day", n)
		}

		renewed, renewedKey, err := ca.Issue(t.TempDir(), "node", "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, renewed, cert, time.Now())
		copyFile(t, renewedKey, key, time.Now())
		if err := node.Reload(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * 24 * time.Hour)
		synctest.Wait()
		if n := len(got()); n != 31 {
			t.Fatalf("warned %d more times with a renewed certificate", n-31)
		}
		cancel()
		<-done
	})
}
