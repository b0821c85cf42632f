package main

import "strings"

// connHint says what a connection failure that gRPC reports in transport
// terms most likely means for this tool's flags, or "": a client without
// --cacert at a node that serves TLS reads "error reading server
// preface", one with TLS at a plaintext node "first record does not look
// like a TLS handshake", and one without a certificate at a node that
// requires one a broken pipe or a closed connection.
func (g *globals) connHint(msg string) string {
	tlsOn, certOn := g.tls.Enabled(), g.tls.Cert != ""
	switch {
	case !tlsOn && strings.Contains(msg, "error reading server preface"):
		return "the node may serve TLS: give --cacert, and --cert with --key if it requires client certificates"
	case tlsOn && strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the node serves plaintext: leave out --cacert, --cert and --key"
	case tlsOn && !certOn && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate")):
		return "the node may require a client certificate: give --cert and --key"
	}
	return ""
}
