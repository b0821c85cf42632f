package cluster

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/tlsconf"
)

// peerTLS returns the Raft-port TLS of a node holding a certificate of
// issuer, trusting trust.
func peerTLS(t *testing.T, issuer, trust *tlsconf.CA, name string) *PeerTLS {
	t.Helper()
	dir := t.TempDir()
	cert, key, err := issuer.Issue(dir, name, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := trust.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	r, err := tlsconf.NewReloader(tlsconf.Files{Cert: cert, Key: key, CA: caFile})
	if err != nil {
		t.Fatal(err)
	}
	return &PeerTLS{Server: r.ServerConfig(), Client: func() *tls.Config { return r.ClientConfig("") }}
}

func tlsMux(t *testing.T, sec *PeerTLS) *Mux {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, nil, sec, slog.New(slog.DiscardHandler), false)
	t.Cleanup(func() { m.Close() })
	return m
}

// With peer TLS, a group's connections run inside mutual TLS: nodes of the
// cluster CA reach each other's groups; a node of another CA, or one
// speaking plaintext, reaches none.
func TestMuxMutualTLS(t *testing.T) {
	ca, err := tlsconf.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	intruderCA, err := tlsconf.NewCA("intruder")
	if err != nil {
		t.Fatal(err)
	}
	a := tlsMux(t, peerTLS(t, ca, ca, "a"))
	b := tlsMux(t, peerTLS(t, ca, ca, "b"))
	evil := tlsMux(t, peerTLS(t, intruderCA, ca, "evil")) // trusts the cluster, is not trusted
	plain := tlsMux(t, nil)

	target, err := a.Layer("shard-0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(m *Mux) (net.Conn, error) {
		l, err := m.Layer("shard-0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Dial(raft.ServerAddress(a.Addr().String()), 2*time.Second)
	}

	conn, err := dial(b)
	if err != nil {
		t.Fatalf("a cluster node's dial: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("append")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-accepted:
		buf := make([]byte, 6)
		if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "append" {
			t.Fatalf("read %q, %v", buf, err)
		}
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the cluster node's connection never reached the group")
	}

	if c, err := dial(evil); err == nil {
		// TLS 1.3: the client may finish before the server refuses.
		_, _ = c.Write([]byte("append"))
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("the intruder's connection stayed open")
		}
		c.Close()
	}
	if c, err := dial(plain); err == nil {
		_ = c.SetReadDeadline(time.Now().Add(muxHeaderTimeout + 2*time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a plaintext connection stayed open")
		}
		c.Close()
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("a connection without a cluster certificate reached the group")
	case <-time.After(200 * time.Millisecond):
	}
}
