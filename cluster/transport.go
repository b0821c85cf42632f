package cluster

import (
	"log/slog"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/raftnet"
)

// How a node's Raft groups reach their peers (--raft-transport).
const (
	// TransportRaftnet: one connection to each peer node carries every
	// group's messages, framed and written together (package raftnet).
	// Peers of an older release are reached, and heard, through
	// NetworkTransport. The default.
	TransportRaftnet = "raftnet"
	// TransportLegacy: hashicorp/raft's NetworkTransport per group, as
	// releases before raftnet did.
	TransportLegacy = "legacy"
)

// groupTransport is what a group's Raft instance talks through.
type groupTransport interface {
	raft.Transport
	raft.WithClose
}

// openNetwork starts the node's raftnet on its Raft port, or returns nil
// with the legacy transport. Its handshakes name the node's cluster, and
// refuse peers of another (admitPeer).
func (n *Node) openNetwork(cfg Config, mux *Mux, log *slog.Logger) (*raftnet.Network, error) {
	if cfg.RaftTransport == TransportLegacy {
		return nil, nil
	}
	layer, err := mux.Layer(raftnet.LayerName)
	if err != nil {
		return nil, err
	}
	return raftnet.New(raftnet.Config{Layer: layer, Timeout: 10 * time.Second, Logger: log,
		Cluster: n.ownCluster, Admit: n.AdmitPeer}), nil
}

// openTransport returns the transport of group o.name: over the node's
// raftnet when it has one, with a NetworkTransport on the group's own mux
// layer for peers that do not speak raftnet (their connections to this
// node arrive there too); that NetworkTransport alone otherwise.
func openTransport(o groupOptions, logger hclog.Logger) (groupTransport, error) {
	layer, err := o.mux.Layer(o.name)
	if err != nil {
		return nil, err
	}
	legacy := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:                layer,
		ServerAddressProvider: o.addrs,
		MaxPool:               2,
		Timeout:               10 * time.Second,
		Logger:                logger,
	})
	if o.rnet == nil {
		return legacy, nil
	}
	t, err := o.rnet.Transport(o.name, legacy, o.addrs)
	if err != nil {
		legacy.Close()
		return nil, err
	}
	return t, nil
}
