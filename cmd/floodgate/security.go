package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/floodgate/floodgate/authz"
	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/tlsconf"
)

// reloadEvery is how often certificate and token files are checked for a
// change (SIGHUP reloads at once).
const reloadEvery = 10 * time.Second

// expiryEvery is how often a certificate near its end (or past it) is
// logged again.
const expiryEvery = 24 * time.Hour

// security is what the security flags build: TLS for each port, the rules
// of who may call what, and the reload of every file they name.
type security struct {
	client, peer        *tlsconf.Reloader // nil when off
	adminToken, peerTok *authz.Token      // nil when off
	rules               *authz.Rules
	gossipKeys          [][]byte    // at start
	gossipFile          *gossipFile // nil without --gossip-key-file
}

func newSecurity(f securityFlags) (*security, error) {
	s := &security{rules: &authz.Rules{}}
	var err error
	if f.client.Enabled() {
		if s.client, err = tlsconf.NewReloader(f.client); err != nil {
			return nil, err
		}
		if f.client.CA != "" {
			s.rules.ClientCAs = s.client.Pool
			s.rules.AdminNames = f.names()
		}
	}
	if f.peer.Enabled() {
		if s.peer, err = tlsconf.NewReloader(f.peer); err != nil {
			return nil, err
		}
		s.rules.PeerCAs = s.peer.Pool
	}
	if s.client != nil {
		// Refuse to start with a certificate other nodes would refuse.
		var peerLeaf *x509.Certificate
		var peerPool *x509.CertPool
		if s.peer != nil {
			peerLeaf, peerPool = s.peer.Leaf(), s.peer.Pool()
		}
		if err := nodeCerts(f, s.client.Leaf(), peerLeaf, peerPool); err != nil {
			return nil, err
		}
		if s.peer != nil {
			if err := distinctCAs(f.client.CA, peerPool); err != nil {
				return nil, err
			}
		}
	}
	if f.adminToken != "" {
		if s.adminToken, err = authz.LoadToken("admin-token-file", f.adminToken); err != nil {
			return nil, err
		}
		s.rules.AdminToken = s.adminToken.Values
	}
	if f.peerToken != "" {
		if s.peerTok, err = authz.LoadToken("peer-token-file", f.peerToken); err != nil {
			return nil, err
		}
		s.rules.PeerToken = s.peerTok.Values
	}
	s.keepApart(f)
	if s.gossipKeys, err = f.keys(); err != nil {
		return nil, err
	}
	if f.gossipKeyFile != "" {
		s.gossipFile = newGossipFile(f.gossipKeyFile)
	}
	return s, nil
}

// keepApart makes a reload refuse files that break a rule checked at
// start: the node certificates must verify as at start, the peer CA must
// not trust the client CA, and the admin and peer tokens must differ.
// Such a file is logged and the previous one stays in use, as for any
// file that fails to load.
func (s *security) keepApart(f securityFlags) {
	s.keepNodeCerts(f)
	if s.adminToken != nil && s.peerTok != nil {
		s.adminToken.SetCheck(func(v [][]byte) error {
			return distinctTokens("admin-token-file", "peer-token-file", v, s.peerTok.Values())
		})
		s.peerTok.SetCheck(func(v [][]byte) error {
			return distinctTokens("peer-token-file", "admin-token-file", v, s.adminToken.Values())
		})
	}
}

// distinctCAs refuses a client CA bundle (file; none when empty) that the
// peer CA trusts: a certificate of the peer CA is a node's, so every
// client certificate it signed could call the Peer service, which can do
// all an operator can.
func distinctCAs(clientCA string, peerPool *x509.CertPool) error {
	if clientCA == "" {
		return nil
	}
	shared, err := tlsconf.TrustedBy(clientCA, peerPool)
	if err != nil {
		return fmt.Errorf("tls-client-ca: %w", err)
	}
	if len(shared) > 0 {
		return fmt.Errorf("tls-client-ca: --peer-tls-ca trusts its CA %s too, so every client certificate it signs would act as a node: give the nodes a CA of their own (floodgatectl tls create makes two)", shared[0])
	}
	return nil
}

// clientPortTLS is the TLS of the client gRPC and HTTP ports (nil when
// plaintext). A client certificate is required when a client CA is set;
// with peer TLS it is requested, for other nodes to present theirs. Any
// certificate given must chain to one of the two CAs; the rules decide
// later what it allows.
func (s *security) clientPortTLS() *tls.Config {
	if s.client == nil {
		return nil
	}
	cfg := s.client.ServerConfig()
	var pools []func() *x509.CertPool
	if s.rules.ClientCAs != nil {
		pools = append(pools, s.rules.ClientCAs)
	}
	if s.rules.PeerCAs != nil {
		pools = append(pools, s.rules.PeerCAs)
	}
	required := s.rules.ClientCAs != nil
	switch {
	case required:
		cfg.ClientAuth = tls.RequireAnyClientCert
	case len(pools) > 0:
		cfg.ClientAuth = tls.RequestClientCert
	default:
		cfg.ClientAuth = tls.NoClientCert
		return cfg
	}
	cfg.ClientCAs = nil
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			if required {
				return errors.New("a client certificate is required")
			}
			return nil
		}
		for _, pool := range pools {
			if _, ok := authz.Names(cs.PeerCertificates, pool()); ok {
				return nil
			}
		}
		return errors.New("the client certificate chains to no trusted CA")
	}
	return cfg
}

// serverOptions secure the client gRPC port: TLS and the call rules.
func (s *security) serverOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	if cfg := s.clientPortTLS(); cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	if s.rules.Enforced() {
		opts = append(opts, grpc.ChainUnaryInterceptor(s.rules.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(s.rules.StreamInterceptor()))
	}
	return opts
}

// peerDialOptions are how this node calls other nodes' Peer service: TLS
// with its peer certificate, verified with the peer CA, and the peer token.
func (s *security) peerDialOptions() []grpc.DialOption {
	var opts []grpc.DialOption
	switch {
	case s.peer != nil:
		opts = append(opts, grpc.WithTransportCredentials(s.peer.ClientCredentials("")))
	case s.client != nil:
		// The client port speaks TLS but nodes have no certificates of
		// their own: verify other nodes with the system's roots and the
		// client CA is not theirs to use. The peer token proves who calls.
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	}
	if s.peerTok != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(authz.Bearer(s.peerTok.Value, s.client != nil)))
	}
	return opts
}

// raftTLS secures the Raft port (nil: plaintext).
func (s *security) raftTLS() *cluster.PeerTLS {
	if s.peer == nil {
		return nil
	}
	return &cluster.PeerTLS{Server: s.peer.ServerConfig(), Client: func() *tls.Config { return s.peer.ClientConfig("") }}
}

// reload reads every certificate, key, CA and token file again; on error
// the previous material stays in use.
func (s *security) reload() error {
	var errs []error
	for _, r := range []*tlsconf.Reloader{s.client, s.peer} {
		if r != nil {
			errs = append(errs, r.Reload())
		}
	}
	for _, t := range []*authz.Token{s.adminToken, s.peerTok} {
		if t != nil {
			errs = append(errs, t.Reload())
		}
	}
	if s.gossipFile != nil {
		errs = append(errs, s.gossipFile.reload())
	}
	return errors.Join(errs...)
}

// certs is every certificate the node serves, keyed by the flag that
// names its file.
func (s *security) certs() map[string]*tlsconf.Reloader {
	out := map[string]*tlsconf.Reloader{}
	if s.client != nil {
		out["tls-cert"] = s.client
	}
	if s.peer != nil {
		out["peer-tls-cert"] = s.peer
	}
	return out
}

// expiries read, by the flag naming its file, when each certificate chain
// the node serves stops verifying and when the last CA of each bundle it
// verifies with ends.
func (s *security) expiries() map[string]func() time.Time {
	out := map[string]func() time.Time{}
	for flag, r := range s.certs() {
		out[flag] = r.NotAfter
	}
	for flag, r := range map[string]*tlsconf.Reloader{"tls-client-ca": s.client, "peer-tls-ca": s.peer} {
		if r != nil && !r.CANotAfter().IsZero() {
			out[flag] = r.CANotAfter
		}
	}
	return out
}

// certExpiry is expiries read now, for the metrics.
func (s *security) certExpiry() map[string]time.Time {
	out := map[string]time.Time{}
	for flag, at := range s.expiries() {
		if t := at(); !t.IsZero() {
			out[flag] = t
		}
	}
	return out
}

// warnExpiry logs a certificate that expires within
// tlsconf.ExpiryWarning, or has expired, naming its flag.
func warnExpiry(log *slog.Logger) func(flag string, notAfter time.Time) {
	return func(flag string, notAfter time.Time) {
		left := time.Until(notAfter)
		if left <= 0 {
			log.Error("the certificate of --"+flag+" has expired: callers that verify it refuse to connect; renew it (the node reloads it when the file changes)",
				"not_after", notAfter.UTC().Format(time.RFC3339))
			return
		}
		log.Warn("the certificate of --"+flag+" expires soon: renew it (the node reloads it when the file changes)",
			"not_after", notAfter.UTC().Format(time.RFC3339), "in", left.Round(time.Hour).String())
	}
}

// watch reloads on SIGHUP and when a certificate or token file changes,
// and warns of certificates near their end, until ctx ends.
func (s *security) watch(ctx context.Context, log *slog.Logger) {
	if certs := s.expiries(); len(certs) > 0 {
		go tlsconf.WatchExpiry(ctx, expiryEvery, certs, warnExpiry(log))
	}
	onErr := func(err error) { log.Error("reload of TLS files failed; the previous ones stay in use", "err", err) }
	for _, r := range []*tlsconf.Reloader{s.client, s.peer} {
		if r != nil {
			go r.Watch(ctx, reloadEvery, onErr)
		}
	}
	onTokErr := func(err error) {
		log.Error("reload of a token file failed; the previous tokens stay in use", "err", err)
	}
	for _, t := range []*authz.Token{s.adminToken, s.peerTok} {
		if t != nil {
			go t.Watch(ctx, reloadEvery, onTokErr)
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := s.reload(); err != nil {
					// Each file is reloaded on its own: those named in
					// err keep their previous contents, the others took
					// their new ones.
					log.Error("SIGHUP: some files were not reloaded and keep their previous contents; the others were reloaded", "err", err)
					continue
				}
				log.Info("SIGHUP: certificates, keys and tokens reloaded")
			}
		}
	}()
}

// binds are where a node's ports listen, for the holes they would open
// beyond loopback.
type binds struct {
	grpc, raft, gossip string
	// profiles is the HTTP address when --pprof serves profiles there
	// ("": none served).
	profiles string
}

// bindsOf returns the listening addresses of a node of opts and cfg.
func bindsOf(opts *options, cfg cluster.Config) binds {
	b := binds{grpc: opts.grpcBind, raft: cfg.RaftBind, gossip: cfg.GossipBind}
	if opts.pprof {
		b.profiles = opts.httpAddr
	}
	return b
}

// openPlane is a port that listens beyond loopback with a hole: calls or
// messages that anyone who reaches it may make, read or forge.
type openPlane struct{ flag, addr, hole string }

// openPlanes lists each hole of a node listening at b, one per plane and
// role: an operator who closes one must still see the others.
func (s *security) openPlanes(b binds) []openPlane {
	var out []openPlane
	beyond := func(addr string) bool { return addr != "" && !cluster.IsLoopback(addr) }
	if beyond(b.grpc) && !s.rules.AdminEnforced() {
		out = append(out, openPlane{"grpc-addr", b.grpc, "Admin calls are open beyond loopback: anyone who reaches the client port may change the cluster; set --admin-token-file or --admin-cert-names (see the README's Security section)"})
	}
	if beyond(b.grpc) && !s.rules.PeerEnforced() {
		out = append(out, openPlane{"grpc-addr", b.grpc, "Peer calls are open beyond loopback: set --peer-tls-* or --peer-token-file (see the README's Security section)"})
	}
	if beyond(b.profiles) && !s.rules.AdminEnforced() {
		out = append(out, openPlane{"http-addr", b.profiles, "profiles (--pprof) are open beyond loopback: anyone who reaches the HTTP port may read them (keys, flags) and load the CPU; set --admin-token-file or --admin-cert-names"})
	}
	if beyond(b.raft) && s.peer == nil {
		out = append(out, openPlane{"raft-addr", b.raft, "the Raft port is plaintext beyond loopback: set --peer-tls-*"})
	}
	if beyond(b.gossip) && len(s.gossipKeys) == 0 {
		out = append(out, openPlane{"gossip-addr", b.gossip, "gossip is plaintext beyond loopback: anyone who reaches the gossip port may read and forge members and rate hints; set --gossip-key-file or --gossip-key (floodgatectl keygen)"})
	}
	return out
}

// warnIfOpen logs when a node listens beyond loopback with calls that
// anyone who reaches the port may make, or with gossip anyone may read
// and forge (members, addresses, rate hints).
func (s *security) warnIfOpen(b binds, log *slog.Logger) {
	for _, p := range s.openPlanes(b) {
		log.Warn(p.hole, "addr", p.addr)
	}
}

// refuseOpen refuses a node with TLS configured that would listen beyond
// loopback with a plane left open. TLS promises that every plane is
// encrypted and that Admin and Peer calls need an identity; such a node
// used to start with a warning alone, and anyone who reached it then
// stored policies with no certificate or token (no admin credential),
// appended to its Raft logs in plaintext (a peer token without peer TLS),
// or forged gossip members (no gossip key). Without TLS the holes stay
// warnings: a node on one host's loopback needs none of this.
func (s *security) refuseOpen(b binds) error {
	if s.client == nil {
		return nil
	}
	var errs []error
	for _, p := range s.openPlanes(b) {
		errs = append(errs, fmt.Errorf("%s: TLS is configured, but %s", p.flag, p.hole))
	}
	return errors.Join(errs...)
}
