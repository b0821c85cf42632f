package main

import (
	"crypto/x509"
	"fmt"

	"github.com/floodgate/floodgate/tlsconf"
)

// nodeCerts refuses certificates other nodes could not verify: they
// dial this node's client port for Peer calls and check --tls-cert as a
// server with the peer CA (the system's roots without one), and they
// check --peer-tls-cert with the peer CA both as a client (Raft, Peer
// calls) and as a server (this node's Raft port). Without this check such
// a certificate would be taken, then fail every node-to-node connection,
// with nothing in the logs naming the file. Each certificate a node
// serves must also hold the host it is dialed at (f's advertised hosts),
// which other nodes check. peerLeaf and peerPool are nil without peer
// TLS.
func nodeCerts(f securityFlags, clientLeaf, peerLeaf *x509.Certificate, peerPool *x509.CertPool) error {
	if err := holdsHost("tls-cert", clientLeaf, f.grpcHost, "grpc-addr"); err != nil {
		return err
	}
	if peerPool == nil {
		if _, err := clientLeaf.Verify(x509.VerifyOptions{}); err != nil {
			return fmt.Errorf("tls-cert: other nodes verify it with the system's roots when there is no --peer-tls-ca, and cannot (%v): set --peer-tls-cert, --peer-tls-key and --peer-tls-ca", err)
		}
		return nil
	}
	if _, err := clientLeaf.Verify(x509.VerifyOptions{Roots: peerPool}); err != nil {
		return fmt.Errorf("tls-cert: other nodes could not verify it with --peer-tls-ca: %w", err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		if _, err := peerLeaf.Verify(x509.VerifyOptions{Roots: peerPool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return fmt.Errorf("peer-tls-cert: other nodes could not verify it with --peer-tls-ca (they check it as a client and as a server): %w", err)
		}
	}
	return holdsHost("peer-tls-cert", peerLeaf, f.raftHost, "raft-addr")
}

// holdsHost refuses a certificate (of flag) without host, the host other
// nodes dial the port of addrFlag at (none: not checked).
func holdsHost(flag string, leaf *x509.Certificate, host, addrFlag string) error {
	if host == "" {
		return nil
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Errorf("%s: other nodes dial this node at %s (--%s, --advertise-host) and check that the certificate names it: %w", flag, host, addrFlag, err)
	}
	return nil
}

// tlsView is one state of a Reloader's material: its certificate and CA.
type tlsView struct {
	leaf *x509.Certificate
	pool *x509.CertPool
}

// views returns the material r has in use and, when they load, its files
// as they are on disk now (nil r: one empty view). A rule between two
// reloaders holds when it holds with either: a rotation that rewrites
// both sides at once (a new CA and the certificates it signs) is then
// taken whichever side the watcher reloads first, rather than refused by
// each side for the other's old material.
func views(r *tlsconf.Reloader, f tlsconf.Files) []tlsView {
	if r == nil {
		return []tlsView{{}}
	}
	out := []tlsView{{r.Leaf(), r.Pool()}}
	if disk, err := tlsconf.NewReloader(f); err == nil {
		out = append(out, tlsView{disk.Leaf(), disk.Pool()})
	}
	return out
}

// anyView returns nil when check accepts one of vs, else its error for
// the first (the material in use).
func anyView(vs []tlsView, check func(tlsView) error) error {
	var first error
	for i, v := range vs {
		err := check(v)
		if err == nil {
			return nil
		}
		if i == 0 {
			first = err
		}
	}
	return first
}

// keepNodeCerts makes a reload of the client or peer files refuse
// material that breaks the rules checked at start (nodeCerts, and the
// client CA kept apart from the peer CA, distinctCAs): such files are
// logged and the previous ones stay in use.
func (s *security) keepNodeCerts(f securityFlags) {
	if s.client == nil {
		return
	}
	s.client.SetCheck(func(leaf *x509.Certificate, _ *x509.CertPool) error {
		return anyView(views(s.peer, f.peer), func(p tlsView) error {
			if err := nodeCerts(f, leaf, p.leaf, p.pool); err != nil {
				return err
			}
			if s.peer == nil {
				return nil
			}
			return distinctCAs(f.client.CA, p.pool)
		})
	})
	if s.peer == nil {
		return
	}
	s.peer.SetCheck(func(leaf *x509.Certificate, pool *x509.CertPool) error {
		if err := distinctCAs(f.client.CA, pool); err != nil {
			return err
		}
		return anyView(views(s.client, f.client), func(c tlsView) error { return nodeCerts(f, c.leaf, leaf, pool) })
	})
}
