package main

import "github.com/floodgate/floodgate/cluster"

// checkConfig checks what a node would check before it opens anything:
// the flags (already parsed), the certificate, key, CA and token files
// they name, and the cluster settings. It opens no port and no data dir,
// so a manifest or a config file can be checked anywhere (CI, an init
// container) with the same rules as a start.
func checkConfig(opts *options) error {
	sec, err := newSecurity(opts.security)
	if err != nil {
		return err
	}
	cfg := nodeConfig(opts, sec)
	if err := sec.refuseOpen(bindsOf(opts, cfg)); err != nil {
		return err
	}
	return cfg.WithDefaults().Validate()
}

// nodeConfig is the node's configuration: the flags' plus what the
// security files give, the same for a start and for --check-config.
func nodeConfig(opts *options, sec *security) cluster.Config {
	cfg := opts.cluster
	cfg.PeerTLS, cfg.GossipKeys = sec.raftTLS(), sec.gossipKeys
	return cfg
}
