package tlsconf

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var names = [3]string{"tls-cert", "tls-key", "tls-client-ca"}

type fixture struct {
	dir                string
	ca, other          *CA
	caFile, otherFile  string
	srvCert, srvKey    string // from ca, for 127.0.0.1
	cliCert, cliKey    string // from ca
	strCert, strKey    string // from other
	wrongHost, wrongHK string // from ca, for 10.9.9.9 only
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir()}
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f.ca, err = NewCA("cluster")
	must(err)
	f.other, err = NewCA("stranger")
	must(err)
	f.caFile, err = f.ca.WriteCA(f.dir, "ca")
	must(err)
	f.otherFile, err = f.other.WriteCA(f.dir, "other-ca")
	must(err)
	f.srvCert, f.srvKey, err = f.ca.Issue(f.dir, "server", "127.0.0.1", "localhost")
	must(err)
	f.cliCert, f.cliKey, err = f.ca.Issue(f.dir, "ops", "spiffe://floodgate/ops")
	must(err)
	f.strCert, f.strKey, err = f.other.Issue(f.dir, "stranger", "127.0.0.1")
	must(err)
	f.wrongHost, f.wrongHK, err = f.ca.Issue(f.dir, "elsewhere", "10.9.9.9")
	must(err)
	return f
}

func TestCheckNamesTheSetting(t *testing.T) {
	f := newFixture(t)
	garbage := filepath.Join(f.dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files Files
		want  string
	}{
		{"cert without key", Files{Cert: f.srvCert}, "tls-key: "},
		{"key without cert", Files{Key: f.srvKey}, "tls-cert: "},
		{"missing cert", Files{Cert: filepath.Join(f.dir, "nope"), Key: f.srvKey}, "tls-cert: "},
		{"missing key", Files{Cert: f.srvCert, Key: filepath.Join(f.dir, "nope")}, "tls-key: "},
		{"garbage cert", Files{Cert: garbage, Key: f.srvKey}, "tls-cert: "},
		{"key of another cert", Files{Cert: f.srvCert, Key: f.cliKey}, "tls-key: not the key of the certificate in --tls-cert"},
		// The key's faults name the key's setting: they used to name the
		// certificate's.
		{"garbage key", Files{Cert: f.srvCert, Key: garbage}, "tls-key: "},
		{"a certificate as the key", Files{Cert: f.srvCert, Key: f.srvCert}, "tls-key: "},
		{"unreadable key", Files{Cert: f.srvCert, Key: f.dir}, "tls-key: "},
		{"a key as the certificate", Files{Cert: f.srvKey, Key: f.srvKey}, "tls-cert: "},
		{"missing CA", Files{CA: filepath.Join(f.dir, "nope")}, "tls-client-ca: "},
		{"CA with no certificate", Files{CA: garbage}, "tls-client-ca: "},
	} {
		err := tc.files.Check(names)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error starting %q", tc.name, err, tc.want)
		}
	}
	if err := (Files{Cert: f.srvCert, Key: f.srvKey, CA: f.caFile}).Check(names); err != nil {
		t.Fatalf("good files refused: %v", err)
	}
	if (Files{}).Enabled() || !(Files{CA: f.caFile}).Enabled() {
		t.Fatal("Enabled wrong")
	}
}

// handshake runs one TLS handshake over loopback TCP and returns the
// errors of both sides and the server's view of the connection.
func handshake(t *testing.T, srv, cli *tls.Config) (st tls.ConnectionState, srvErr, cliErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		err error
		st  tls.ConnectionState
	}
	done := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer conn.Close()
		s := tls.Server(conn, srv)
		err = s.Handshake()
		done <- result{err, s.ConnectionState()}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := tls.Client(conn, cli)
	cliErr = c.Handshake()
	r := <-done
	return r.st, r.err, cliErr
}

func reloader(t *testing.T, f Files) *Reloader {
	t.Helper()
	r, err := NewReloader(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMutualTLS(t *testing.T) {
	f := newFixture(t)
	srv := reloader(t, Files{Cert: f.srvCert, Key: f.srvKey, CA: f.caFile}).ServerConfig()
	for _, tc := range []struct {
		name   string
		client Files
		ok     bool
	}{
		{"a client certificate of the CA", Files{Cert: f.cliCert, Key: f.cliKey, CA: f.caFile}, true},
		{"no client certificate", Files{CA: f.caFile}, false},
		{"a stranger's certificate", Files{Cert: f.strCert, Key: f.strKey, CA: f.caFile}, false},
	} {
		st, srvErr, cliErr := handshake(t, srv, reloader(t, tc.client).ClientConfig("127.0.0.1"))
		if ok := srvErr == nil && cliErr == nil; ok != tc.ok {
			t.Errorf("%s: server %v, client %v; want ok=%v", tc.name, srvErr, cliErr, tc.ok)
		}
		if tc.ok && (len(st.PeerCertificates) == 0 || st.PeerCertificates[0].Subject.CommonName != "ops") {
			t.Errorf("%s: the server does not see the client's certificate", tc.name)
		}
	}
}

func TestClientVerifiesTheServer(t *testing.T) {
	f := newFixture(t)
	cli := reloader(t, Files{CA: f.caFile})
	for _, tc := range []struct {
		name       string
		srv        Files
		serverName string
		ok         bool
	}{
		{"the CA's certificate for the host", Files{Cert: f.srvCert, Key: f.srvKey}, "127.0.0.1", true},
		{"by DNS name", Files{Cert: f.srvCert, Key: f.srvKey}, "localhost", true},
		{"another CA", Files{Cert: f.strCert, Key: f.strKey}, "127.0.0.1", false},
		{"another host", Files{Cert: f.wrongHost, Key: f.wrongHK}, "127.0.0.1", false},
	} {
		_, _, cliErr := handshake(t, reloader(t, tc.srv).ServerConfig(), cli.ClientConfig(tc.serverName))
		if ok := cliErr == nil; ok != tc.ok {
			t.Errorf("%s: client %v, want ok=%v", tc.name, cliErr, tc.ok)
		}
	}
}

// A reload swaps the certificate for new handshakes; a broken file on
// reload keeps the one in use.
func TestReload(t *testing.T) {
	f := newFixture(t)
	cert, key := filepath.Join(f.dir, "live.crt"), filepath.Join(f.dir, "live.key")
	install := func(c, k string) {
		t.Helper()
		for src, dst := range map[string]string{c: cert, k: key} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst+".tmp", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dst+".tmp", dst); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(f.srvCert, f.srvKey)
	r := reloader(t, Files{Cert: cert, Key: key})
	srv := r.ServerConfig()
	served := func() string {
		t.Helper()
		var name string
		_, _, _ = handshake(t, srv, &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
			name = cs.PeerCertificates[0].Subject.CommonName
			return nil
		}})
		return name
	}
	if got := served(); got != "server" {
		t.Fatalf("serves %q", got)
	}
	install(f.strCert, f.strKey)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "stranger" || r.Leaf().Subject.CommonName != "stranger" {
		t.Fatalf("after a reload, serves %q", got)
	}
	if err := os.WriteFile(key, []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil {
		t.Fatal("a broken key reloaded")
	}
	if got := served(); got != "stranger" {
		t.Fatalf("a failed reload changed the certificate to %q", got)
	}
}
