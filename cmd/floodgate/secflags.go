package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/floodgate/floodgate/authz"
	"github.com/floodgate/floodgate/tlsconf"
)

// securityFlags are the settings that protect the node's ports.
type securityFlags struct {
	client     tlsconf.Files // client gRPC and HTTP ports; CA verifies client certificates
	peer       tlsconf.Files // Raft port and Peer calls; CA verifies the other nodes
	gossipKey  string        // base64
	adminToken string        // file
	peerToken  string        // file
	adminNames string        // comma-separated certificate names
	// gossipKeyFile holds the base64 key instead: a flag's value is
	// visible to every local user in the process list.
	gossipKeyFile string
	// grpcHost and raftHost are the advertised hosts of --grpc-addr and
	// --raft-addr: other nodes check that the certificates hold them.
	grpcHost, raftHost string
}

func defineSecurity(fs *flag.FlagSet) *securityFlags {
	s := &securityFlags{}
	fs.StringVar(&s.client.Cert, "tls-cert", "", "PEM certificate of the client gRPC and HTTP ports (TLS when set)")
	fs.StringVar(&s.client.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&s.client.CA, "tls-client-ca", "", "PEM CA bundle that client certificates must chain to (mutual TLS when set)")
	fs.StringVar(&s.peer.Cert, "peer-tls-cert", "", "PEM certificate this node presents to other nodes, on the Raft port and in Peer calls")
	fs.StringVar(&s.peer.Key, "peer-tls-key", "", "PEM private key of --peer-tls-cert")
	fs.StringVar(&s.peer.CA, "peer-tls-ca", "", "PEM CA bundle of the cluster's nodes: their certificates must chain to it")
	fs.StringVar(&s.gossipKey, "gossip-key", "", "base64 AES key (16, 24 or 32 bytes) encrypting gossip; the same on every node (floodgatectl keygen)")
	fs.StringVar(&s.gossipKeyFile, "gossip-key-file", "", "file holding the --gossip-key (kept out of the process list, which every local user can read); several keys, one a line, rotate it: the first encrypts, all decrypt; reloaded when it changes and on SIGHUP")
	fs.StringVar(&s.adminToken, "admin-token-file", "", "file holding the bearer token of operators (one a line while rotating: the first is sent, all are accepted): Admin calls that change the cluster need it (or a client certificate named in --admin-cert-names)")
	fs.StringVar(&s.peerToken, "peer-token-file", "", "file holding the bearer token all nodes share (one a line while rotating: the first is sent, all are accepted): Peer calls need it (or a --peer-tls-ca certificate)")
	fs.StringVar(&s.adminNames, "admin-cert-names", "", "comma-separated client certificate names (common name, DNS or URI SAN) granted the Admin calls")
	return s
}

var (
	clientTLSNames = [3]string{"tls-cert", "tls-key", "tls-client-ca"}
	peerTLSNames   = [3]string{"peer-tls-cert", "peer-tls-key", "peer-tls-ca"}
)

// check refuses settings that would leave a door open or cannot work,
// naming the setting.
func (s *securityFlags) check() error {
	if s.client.Enabled() {
		if s.client.Cert == "" {
			return errors.New("tls-cert: needed for TLS on the client ports (--tls-key or --tls-client-ca was given)")
		}
		if err := s.client.Check(clientTLSNames); err != nil {
			return err
		}
	}
	if s.peer.Enabled() {
		switch {
		case s.peer.Cert == "" || s.peer.Key == "" || s.peer.CA == "":
			return errors.New("peer-tls-cert: --peer-tls-cert, --peer-tls-key and --peer-tls-ca go together (nodes verify each other)")
		case s.client.Cert == "":
			return errors.New("peer-tls-cert: Peer calls share the client gRPC port, which then needs --tls-cert too")
		}
		if err := s.peer.Check(peerTLSNames); err != nil {
			return err
		}
	}
	if s.client.CA != "" && !s.peer.Enabled() {
		// Other nodes call the Peer service on the client port, whose
		// mutual TLS would refuse them for want of a certificate.
		return errors.New("tls-client-ca: the client port then requires a certificate of every caller, other nodes included, and nodes present --peer-tls-cert: set --peer-tls-cert, --peer-tls-key and --peer-tls-ca")
	}
	if _, err := s.keys(); err != nil {
		return err
	}
	if s.adminNames != "" && s.client.CA == "" {
		return errors.New("admin-cert-names: needs --tls-client-ca to verify the client certificates it names")
	}
	if (s.adminToken != "" || s.adminNames != "") && s.peerToken == "" && !s.peer.Enabled() {
		return errors.New("admin-token-file: the Peer service, which can do all an operator can, would stay open: set --peer-token-file or --peer-tls-*")
	}
	tokens := map[string]*authz.Token{}
	for flag, file := range map[string]string{"admin-token-file": s.adminToken, "peer-token-file": s.peerToken} {
		if file != "" {
			t, err := authz.LoadToken(flag, file)
			if err != nil {
				return err
			}
			tokens[flag] = t
		}
	}
	if a, p := tokens["admin-token-file"], tokens["peer-token-file"]; a != nil && p != nil {
		return distinctTokens("peer-token-file", "admin-token-file", p.Values(), a.Values())
	}
	return nil
}

// distinctTokens refuses tokens (of flag) one of which is one of the
// other role's (of other): one token for both would make every operator a
// node and every node an operator, and neither credential may stand in
// for the other.
func distinctTokens(flag, other string, tokens, others [][]byte) error {
	for _, t := range tokens {
		for _, o := range others {
			if bytes.Equal(t, o) {
				return fmt.Errorf("%s: holds the same token as --%s; give the nodes a token of their own", flag, other)
			}
		}
	}
	return nil
}

// keys decodes --gossip-key, or the keys in --gossip-key-file (one a
// line, the first the one gossip encrypts with).
func (s *securityFlags) keys() ([][]byte, error) {
	if s.gossipKeyFile != "" {
		if s.gossipKey != "" {
			return nil, errors.New("gossip-key-file: give --gossip-key or --gossip-key-file, not both")
		}
		return readGossipKeys(s.gossipKeyFile)
	}
	if s.gossipKey == "" {
		return nil, nil
	}
	k, err := decodeGossipKey(s.gossipKey)
	if err != nil {
		return nil, fmt.Errorf("gossip-key: %w", err)
	}
	return [][]byte{k}, nil
}

// readGossipKeys reads a --gossip-key-file: a key a line, blank lines
// skipped.
func readGossipKeys(file string) ([][]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("gossip-key-file: %w", err)
	}
	var keys [][]byte
	for n, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, err := decodeGossipKey(line)
		if err != nil {
			return nil, fmt.Errorf("gossip-key-file: line %d of %s: %w", n+1, file, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip-key-file: %s holds no key", file)
	}
	return keys, nil
}

// decodeGossipKey decodes one base64 key and checks its size.
func decodeGossipKey(v string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	if n := len(k); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("%d bytes, want 16, 24 or 32 (floodgatectl keygen makes one)", n)
	}
	return k, nil
}

// names splits --admin-cert-names.
func (s *securityFlags) names() []string {
	var out []string
	for _, n := range strings.Split(s.adminNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
