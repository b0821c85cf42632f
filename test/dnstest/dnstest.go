package dnstest

import (
	"context"
	"net"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// Server is a DNS server on UDP loopback.
type Server struct {
	// Addr is the server's host:port.
	Addr  string
	conn  net.PacketConn
	mu    sync.Mutex
	names map[string][]net.IP
	done  chan struct{}
}

// Start serves on a free UDP port of 127.0.0.1.
func Start() (*Server, error) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: conn.LocalAddr().String(), conn: conn, names: map[string][]net.IP{}, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

// Set makes name resolve to ips (none: the name does not exist).
func (s *Server) Set(name string, ips ...string) {
	var list []net.IP
	for _, ip := range ips {
		list = append(list, net.ParseIP(ip).To4())
	}
	s.mu.Lock()
	s.names[canonical(name)] = list
	s.mu.Unlock()
}

// Close stops the server.
func (s *Server) Close() {
	s.conn.Close()
	<-s.done
}

// Resolver is a resolver that asks only this server.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr)
	}}
}

func canonical(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

func (s *Server) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp, ok := s.answer(buf[:n]); ok {
			_, _ = s.conn.WriteTo(resp, from)
		}
	}
}

// answer builds the reply to one query: the A records of a known name, no
// records for its other types, NXDOMAIN for an unknown name.
func (s *Server) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	ips, known := s.names[canonical(q.Name.String())]
	s.mu.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known || len(ips) == 0 {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	if known && q.Type == dnsmessage.TypeA {
		for _, ip := range ips {
			var a [4]byte
			copy(a[:], ip)
			if b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}, dnsmessage.AResource{A: a}) != nil {
				return nil, false
			}
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
