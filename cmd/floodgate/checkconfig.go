package main

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
	cfg := opts.cluster
	cfg.PeerTLS, cfg.GossipKey = sec.raftTLS(), sec.gossipKey
	return cfg.WithDefaults().Validate()
}
