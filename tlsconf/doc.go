// Package tlsconf loads the certificates, keys and CA bundles of a node's
// TLS settings and keeps them current: a Reloader reads the PEM files
// again on demand (SIGHUP) or when they change on disk, and the tls.Config
// values it returns use whatever was loaded last, so certificates rotate
// (cert-manager, Vault) without a restart. It also holds a throwaway CA
// for tests and local setups.
package tlsconf
