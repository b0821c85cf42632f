package main

import (
	"fmt"
	"net"
)

// listeners are the node's client ports, bound before its data dir is
// touched.
type listeners struct {
	grpc, http, health net.Listener // http and health nil when off
}

// listen binds the client ports (--grpc-addr, --http-addr, --health-addr)
// before the node opens its data dir: a port already taken fails the
// start with nothing written. Bound after, a first start that failed on
// one had claimed the data dir under a generated node id, and a retry
// with the intended --node-id was refused as another node's.
func listen(opts *options) (*listeners, error) {
	l := &listeners{}
	var err error
	if l.grpc, err = net.Listen("tcp", opts.grpcBind); err != nil {
		return nil, fmt.Errorf("grpc-addr: %w", err)
	}
	if opts.httpAddr != "" {
		if l.http, err = net.Listen("tcp", opts.httpAddr); err != nil {
			l.close()
			return nil, fmt.Errorf("http-addr: %w", err)
		}
	}
	if opts.healthAddr != "" {
		if l.health, err = net.Listen("tcp", opts.healthAddr); err != nil {
			l.close()
			return nil, fmt.Errorf("health-addr: %w", err)
		}
	}
	return l, nil
}

// close closes every listener bound; servers close theirs once serving.
func (l *listeners) close() {
	for _, ln := range []net.Listener{l.grpc, l.http, l.health} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}
