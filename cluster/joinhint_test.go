package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A join that fails for a security mismatch says which settings to
// change; the messages are those real nodes reported for each mismatch.
// It used to show gRPC's transport error alone, retried for minutes.
func TestJoinHint(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New(`no leader: connection error: desc = "error reading server preface: EOF"`), "the member may serve TLS"},
		{errors.New(`no leader: connection error: desc = "error reading server preface: connection reset by peer"`), "the member may serve TLS"},
		{errors.New(`no leader: connection error: desc = "transport: authentication handshake failed: tls: first record does not look like a TLS handshake"`), "the member serves plaintext"},
		{errors.New(`no leader: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`), "not of this node's --peer-tls-ca"},
		{errors.New(`no leader: connection error: desc = "error reading server preface: remote error: tls: bad certificate"`), "refused this node's certificate"},
		{fmt.Errorf("%w: PermissionDenied: /floodgate.peer.v1.Peer/AddNode: permission denied", ErrDenied), "--peer-token-file must hold"},
		{errors.New("connection refused"), ""},
	} {
		err := withJoinHint(tc.err)
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: the hinted error no longer wraps it", tc.err)
		}
		got := strings.TrimPrefix(err.Error(), tc.err.Error())
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v: hint %q, want one with %q", tc.err, got, tc.want)
		}
	}
}
