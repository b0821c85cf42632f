package cluster

import (
	"errors"
	"strings"
)

// joinHint says which security settings a failed join most likely needs
// changed, or "". A TLS mismatch reaches a joining node as gRPC's
// transport error alone ("error reading server preface: EOF" for a
// plaintext node at a TLS member), retried for minutes, which named no
// flag; the messages matched are those real nodes report.
func joinHint(err error) string {
	if errors.Is(err, ErrDenied) {
		return "the member refused this node's peer credentials: --peer-token-file must hold a token the members accept, or --peer-tls-cert be of their --peer-tls-ca"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "bad certificate"), strings.Contains(msg, "certificate required"),
		strings.Contains(msg, "unknown certificate authority"), strings.Contains(msg, "expired certificate"):
		return "the member refused this node's certificate: --peer-tls-cert must be of the members' --peer-tls-ca"
	case strings.Contains(msg, "error reading server preface: EOF"), strings.Contains(msg, "error reading server preface: connection reset"):
		// A TLS member closes on the plaintext preface: at once (EOF) or
		// with a reset.
		return "the member may serve TLS: give this node the members' --tls-* and --peer-tls-* settings"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the member serves plaintext: this node has TLS settings (--tls-cert, --peer-tls-*) the members do not"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "the member's certificate is not of this node's --peer-tls-ca"
	case strings.Contains(msg, "certificate is valid for"):
		return "the member's certificate does not name the host this node dialed (--join)"
	}
	return ""
}

// withJoinHint appends joinHint's hint to err, if any.
func withJoinHint(err error) error {
	if h := joinHint(err); h != "" {
		return &hinted{err, h}
	}
	return err
}

// hinted is an error with a hint after it, still matching what it wraps.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + " (" + h.hint + ")" }
func (h *hinted) Unwrap() error { return h.err }
