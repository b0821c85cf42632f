package tlsconf

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A certificate is warned of daily from ExpiryWarning before it expires,
// and after; a renewed one ends the warnings; a CA bundle far from its end
// is not warned of.
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
			WatchExpiry(ctx, 24*time.Hour, map[string]func() time.Time{"tls-cert": node.NotAfter, "tls-client-ca": bundle.CANotAfter}, func(flag string, at time.Time) {
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

// A chain stops verifying when its first certificate ends: an
// intermediate that ends before the leaf is the chain's end. A CA bundle
// ends with the last of its CAs: one retiring beside its successor is no
// end.
func TestChainAndBundleEnds(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	rootKey, root := selfSigned(t, "root", now.AddDate(10, 0, 0))
	_, oldRoot := selfSigned(t, "old root", now.AddDate(0, 0, 3))
	interKey, inter := signed(t, "intermediate", now.AddDate(0, 0, 20), true, root, rootKey)
	leafKey, leaf := signed(t, "node", now.AddDate(1, 0, 0), false, inter, interKey)
	certFile, keyFile, caFile := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key"), filepath.Join(dir, "ca.crt")
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	for file, blocks := range map[string][]*pem.Block{
		certFile: {{Type: "CERTIFICATE", Bytes: leaf.Raw}, {Type: "CERTIFICATE", Bytes: inter.Raw}},
		keyFile:  {{Type: "PRIVATE KEY", Bytes: keyDER}},
		caFile:   {{Type: "CERTIFICATE", Bytes: oldRoot.Raw}, {Type: "CERTIFICATE", Bytes: root.Raw}},
	} {
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := reloader(t, Files{Cert: certFile, Key: keyFile, CA: caFile})
	if got := r.NotAfter(); !got.Equal(inter.NotAfter) {
		t.Errorf("NotAfter %v, want the intermediate's %v (the leaf's is %v)", got, inter.NotAfter, leaf.NotAfter)
	}
	if got := r.CANotAfter(); !got.Equal(root.NotAfter) {
		t.Errorf("CANotAfter %v, want the newer root's %v (the old one's is %v)", got, root.NotAfter, oldRoot.NotAfter)
	}
}

// selfSigned is a CA certificate ending at notAfter.
func selfSigned(t *testing.T, name string, notAfter time.Time) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := certTemplate(name, notAfter, true)
	return key, create(t, tmpl, tmpl, key, key)
}

// signed is a certificate for name signed by parent, ending at notAfter.
func signed(t *testing.T, name string, notAfter time.Time, isCA bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key, create(t, certTemplate(name, notAfter, isCA), parent, key, parentKey)
}

func certTemplate(name string, notAfter time.Time, isCA bool) *x509.Certificate {
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, BasicConstraintsValid: true, IsCA: isCA,
		KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: []string{name},
	}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	return tmpl
}

func create(t *testing.T, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
