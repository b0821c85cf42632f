package main

import "strings"

// connHint says what a connection failure that gRPC reports in transport
// terms most likely means for this tool's flags, or "": a client without
// --cacert at a node that serves TLS reads "error reading server
// preface", one with TLS at a plaintext node "first record does not look
// like a TLS handshake", and one without a certificate at a node that
// requires one a broken pipe or a closed connection. A node certificate
// that --cacert (or, without it, the system) does not trust reads
// "certificate signed by unknown authority", one without --addr's host
// "certificate is valid for", and a --cert the node does not trust "bad
// certificate".
func (g *globals) connHint(msg string) string {
	tlsOn, certOn := g.tls.Enabled(), g.tls.Cert != ""
	switch {
	case tlsOn && strings.Contains(msg, "certificate signed by unknown authority") && g.tls.CA == "":
		return "without --cacert the node's certificate is checked with the system's CAs: give --cacert, the CA that signed it (the cluster CA, --peer-tls-ca)"
	case tlsOn && strings.Contains(msg, "certificate signed by unknown authority"):
		return "--cacert does not hold the CA that signed the node's certificate (the cluster CA, --peer-tls-ca)"
	case tlsOn && strings.Contains(msg, "certificate is valid for"):
		return "the node's certificate does not name the host of --addr: dial it at one of the names it holds"
	case certOn && (strings.Contains(msg, "bad certificate") || strings.Contains(msg, "unknown certificate authority") ||
		strings.Contains(msg, "certificate expired")):
		return "the node refused --cert: it must be signed by the node's --tls-client-ca and be valid now"
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
