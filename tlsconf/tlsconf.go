package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/filewatch"
)

// Files names PEM files. Cert and Key are this side's certificate and
// key. CA is the bundle that verifies the other side: for a server, the
// client certificates (mutual TLS when set); for a client, the server's
// certificate (the system roots when empty).
type Files struct{ Cert, Key, CA string }

// Enabled reports whether any file is named.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Check validates the files: Cert and Key go together, and each file named
// exists and parses. Every error starts with the name, from names, of the
// setting at fault (names lists those of Cert, Key and CA).
func (f Files) Check(names [3]string) error {
	switch {
	case f.Cert != "" && f.Key == "":
		return fmt.Errorf("%s: required with %s", names[1], names[0])
	case f.Key != "" && f.Cert == "":
		return fmt.Errorf("%s: required with %s", names[0], names[1])
	}
	if f.Cert != "" {
		var pair [2][]byte
		for i, p := range []string{f.Cert, f.Key} {
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("%s: %w", names[i], err)
			}
			pair[i] = b
		}
		if _, err := tls.X509KeyPair(pair[0], pair[1]); err != nil {
			return pairError(names, err)
		}
	}
	if f.CA != "" {
		if _, _, err := loadPool(f.CA); err != nil {
			return fmt.Errorf("%s: %w", names[2], err)
		}
	}
	return nil
}

// pairError names the setting at fault in crypto/tls's error for a
// certificate and key that do not load together: the key's, unless the
// certificate file is what could not be read, since a key that does not
// match its certificate is most often the wrong key file.
func pairError(names [3]string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "certificate input"), strings.Contains(msg, "certificate PEM"):
		return fmt.Errorf("%s: %w", names[0], err)
	case strings.Contains(msg, "does not match"):
		return fmt.Errorf("%s: not the key of the certificate in --%s: %w", names[1], names[0], err)
	}
	return fmt.Errorf("%s: %w", names[1], err)
}

func loadPool(file string) (*x509.CertPool, time.Time, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, time.Time{}, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, time.Time{}, errors.New("no PEM certificate in " + file)
	}
	return pool, lastNotAfter(b), nil
}

// lastNotAfter is when the last of the PEM certificates in b to expire
// does: a bundle may hold a retiring CA beside its successor, and only
// when every one is past its end is nothing left to verify with.
func lastNotAfter(b []byte) time.Time {
	var last time.Time
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return last
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && block.Type == "CERTIFICATE" && c.NotAfter.After(last) {
			last = c.NotAfter
		}
	}
}

// material is one consistent load of the files.
type material struct {
	cert *tls.Certificate // nil without Cert
	leaf *x509.Certificate
	pool *x509.CertPool // nil without CA
	// notAfter is when the first certificate of the served chain (the
	// leaf, or an intermediate that ends before it) expires; caNotAfter
	// when the last CA of the bundle does. Zero without them.
	notAfter, caNotAfter time.Time
}

func load(f Files) (*material, error) {
	m := &material{}
	if f.Cert != "" || f.Key != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", f.Cert, f.Key, err) // a reload's log names the files
		}
		if m.leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
		pair.Leaf = m.leaf
		m.cert = &pair
		m.notAfter = m.leaf.NotAfter
		for _, der := range pair.Certificate[1:] {
			// Clients that build their path through it refuse the chain
			// once any of it has expired. One Go cannot parse (served as
			// bytes, as before) tells no end.
			if c, err := x509.ParseCertificate(der); err == nil && c.NotAfter.Before(m.notAfter) {
				m.notAfter = c.NotAfter
			}
		}
	}
	if f.CA != "" {
		p, last, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		m.pool, m.caNotAfter = p, last
	}
	return m, nil
}

// Reloader holds the material loaded from Files and loads it again on
// Reload or when Watch sees a file change. A load that fails keeps the
// previous material whole.
type Reloader struct {
	files Files
	mu    sync.RWMutex
	cur   *material
	seen  filewatch.Stamp // the files' state when last loaded, for Watch
	check func(leaf *x509.Certificate, pool *x509.CertPool) error
}

// SetCheck makes every later reload put new files in use only once check
// accepts their certificate and CA pool (each nil without its file): a
// rule between settings that held at start (say, two CAs that must stay
// apart, or a certificate the other nodes must be able to verify) then
// holds after a rotation too. Call it before Watch.
func (r *Reloader) SetCheck(check func(leaf *x509.Certificate, pool *x509.CertPool) error) {
	r.mu.Lock()
	r.check = check
	r.mu.Unlock()
}

// NewReloader loads f once.
func NewReloader(f Files) (*Reloader, error) {
	r := &Reloader{files: f}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload loads the files now.
func (r *Reloader) Reload() error {
	st := filewatch.Of(r.files.paths()...)
	m, err := load(r.files)
	if err != nil {
		return err
	}
	r.mu.RLock()
	check := r.check
	r.mu.RUnlock()
	if check != nil {
		if err := check(m.leaf, m.pool); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.cur, r.seen = m, st
	r.mu.Unlock()
	return nil
}

func (r *Reloader) get() *material {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cur
}

// Leaf is the current certificate (nil without one).
func (r *Reloader) Leaf() *x509.Certificate { return r.get().leaf }

// Pool is the current CA pool (nil without a CA).
func (r *Reloader) Pool() *x509.CertPool { return r.get().pool }

// ServerConfig serves the current certificate and, when a CA is set,
// requires a client certificate that chains to the current CA. The
// checks run at each handshake, so a reload applies to new connections,
// and the config can be cloned (gRPC does).
func (r *Reloader) ServerConfig() *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := r.get().cert; c != nil {
				return c, nil
			}
			return nil, errors.New("no certificate configured")
		},
	}
	if r.files.CA != "" {
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verify(cs.PeerCertificates, r.get().pool, "", x509.ExtKeyUsageClientAuth)
		}
	}
	return cfg
}

// ClientConfig is a snapshot for dialing: it presents the current
// certificate (if any) and verifies the server's against the current CA
// (the system roots without one) and against serverName, or the host
// dialed when serverName is empty (crypto/tls's own check, IP SANs
// included). Call it per connection, or use ClientCredentials, for
// reloads to apply.
func (r *Reloader) ClientConfig(serverName string) *tls.Config {
	m := r.get()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, RootCAs: m.pool}
	if m.cert != nil {
		cfg.Certificates = []tls.Certificate{*m.cert}
	}
	return cfg
}

// verify checks a presented chain (leaf first) against pool (system
// roots when nil) and, when host is not empty, the leaf's names.
func verify(chain []*x509.Certificate, pool *x509.CertPool, host string, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("tls: no certificate presented")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}
	if host != "" {
		opts.DNSName = hostOnly(host)
	}
	_, err := chain[0].Verify(opts)
	return err
}

func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

// TrustedBy lists the subjects of the certificates of the PEM bundle file
// that pool trusts (each verifies against it). Every certificate one of
// them signs is then trusted by pool as well.
func TrustedBy(file string, pool *x509.CertPool) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var trusted []string
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return trusted, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
			trusted = append(trusted, c.Subject.String())
		}
	}
}
