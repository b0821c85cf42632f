package tlsconf

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// copyFile installs src at dst by rename, as cert-manager and Vault agents
// do, with a modification time that differs from the last one.
func copyFile(t *testing.T, src, dst string, mod time.Time) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dst+".tmp", mod, mod); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		t.Fatal(err)
	}
}

// Watch picks up a rotated certificate at its next look, reports a broken
// one once (keeping the previous), and stops with its context.
func TestWatch(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	base := time.Now().Add(-time.Hour) // real times: file stamps are real
	copyFile(t, f.srvCert, cert, base)
	copyFile(t, f.srvKey, key, base)
	synctest.Test(t, func(t *testing.T) {
		r := reloader(t, Files{Cert: cert, Key: key})
		ctx, cancel := context.WithCancel(context.Background())
		var errs []error
		stopped := make(chan struct{})
		go func() {
			r.Watch(ctx, 10*time.Second, func(err error) { errs = append(errs, err) })
			close(stopped)
		}()

		copyFile(t, f.strCert, cert, base.Add(time.Minute))
		copyFile(t, f.strKey, key, base.Add(time.Minute))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := r.Leaf().Subject.CommonName; got != "server" {
			t.Fatalf("reloaded before the interval: %q", got)
		}
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if got := r.Leaf().Subject.CommonName; got != "stranger" {
			t.Fatalf("after the interval, serves %q", got)
		}

		// A certificate written before its key: reported once, not at
		// every look, and the previous pair stays.
		copyFile(t, f.cliCert, cert, base.Add(2*time.Minute))
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if len(errs) != 1 || r.Leaf().Subject.CommonName != "stranger" {
			t.Fatalf("errors %v, serving %q", errs, r.Leaf().Subject.CommonName)
		}
		copyFile(t, f.cliKey, key, base.Add(2*time.Minute))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := r.Leaf().Subject.CommonName; got != "ops" || len(errs) != 1 {
			t.Fatalf("the pair completed: serving %q, errors %v", got, errs)
		}

		cancel()
		synctest.Wait()
		select {
		case <-stopped:
		default:
			t.Fatal("Watch did not stop with its context")
		}
	})
}

// ClientCredentials take the CA of the moment at each connection.
func TestClientCredentialsFollowReloads(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	copyFile(t, f.otherFile, caFile, time.Now())
	r := reloader(t, Files{CA: caFile})
	srv := reloader(t, Files{Cert: f.srvCert, Key: f.srvKey}).ServerConfig()
	if _, _, err := handshake(t, srv, r.ClientConfig("127.0.0.1")); err == nil {
		t.Fatal("verified a server with the wrong CA")
	}
	copyFile(t, f.caFile, caFile, time.Now().Add(time.Second))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := handshake(t, srv, r.ClientConfig("127.0.0.1")); err != nil {
		t.Fatalf("after the CA's reload: %v", err)
	}
	creds := r.ClientCredentials("")
	if creds.Info().SecurityProtocol != "tls" {
		t.Fatalf("protocol %q", creds.Info().SecurityProtocol)
	}
	if _, _, err := creds.ServerHandshake(nil); err == nil {
		t.Fatal("client credentials served")
	}
	if c := creds.Clone(); c == nil || c == creds {
		t.Fatal("Clone did not copy")
	}
}

// A load refused by SetCheck's rule is tried again at every look, so it
// is taken once the other file it waits for is rotated: it used to wait
// for its own files to change again (or a SIGHUP), serving the previous
// certificate meanwhile.
func TestWatchRetriesARefusedLoad(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	base := time.Now().Add(-time.Hour)
	copyFile(t, f.srvCert, cert, base)
	copyFile(t, f.srvKey, key, base)
	synctest.Test(t, func(t *testing.T) {
		r := reloader(t, Files{Cert: cert, Key: key})
		var otherRotated atomic.Bool // the other file the rule reads
		r.SetCheck(func(leaf *x509.Certificate, _ *x509.CertPool) error {
			if leaf.Subject.CommonName == "stranger" && !otherRotated.Load() {
				return errors.New("not yet")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var errs []error
		go r.Watch(ctx, 10*time.Second, func(err error) { errs = append(errs, err) })

		copyFile(t, f.strCert, cert, base.Add(time.Minute))
		copyFile(t, f.strKey, key, base.Add(time.Minute))
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if got := r.Leaf().Subject.CommonName; got != "server" || len(errs) != 1 {
			t.Fatalf("refused: serving %q, errors %v (want one)", got, errs)
		}
		otherRotated.Store(true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := r.Leaf().Subject.CommonName; got != "stranger" || len(errs) != 1 {
			t.Fatalf("once the rule holds: serving %q, errors %v", got, errs)
		}
	})
}
