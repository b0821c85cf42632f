package main

import (
	"strings"
	"testing"

	"github.com/floodgate/floodgate/tlsconf"
)

// The transport errors gRPC reports for a TLS mismatch (as measured
// against real nodes) get a hint naming the flags to change; other errors,
// or the same ones with flags that cannot be the cause, get none.
func TestConnHint(t *testing.T) {
	plain, ca, mutual := tlsconf.Files{}, tlsconf.Files{CA: "ca.crt"}, tlsconf.Files{CA: "ca.crt", Cert: "c.crt", Key: "c.key"}
	for _, tc := range []struct {
		files tlsconf.Files
		msg   string
		want  string
	}{
		{plain, `Unavailable: connection error: desc = "error reading server preface: EOF"`, "give --cacert"},
		{ca, `Unavailable: connection error: desc = "error reading server preface: remote error: tls: certificate required"`, "give --cert and --key"},
		{ca, `Unavailable: connection error: desc = "write tcp 127.0.0.1:5->127.0.0.1:7700: write: broken pipe"`, "give --cert and --key"},
		{ca, `Unavailable: connection error: desc = "transport: authentication handshake failed: tls: first record does not look like a TLS handshake"`, "leave out --cacert"},
		{tlsconf.Files{Cert: "c.crt", Key: "c.key"}, `Unavailable: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`, "give --cacert"},
		{mutual, `Unavailable: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`, "--cacert does not hold the CA"},
		{mutual, `Unavailable: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate is valid for other.example, not 127.0.0.1"`, "does not name the host of --addr"},
		{mutual, `Unavailable: connection error: desc = "error reading server preface: remote error: tls: bad certificate"`, "the node refused --cert"},
		{mutual, `Unavailable: connection error: desc = "write: broken pipe"`, ""},
		{plain, "Unavailable: connection error: connection refused", ""},
		{ca, "InvalidArgument: key: must not be empty", ""},
	} {
		g := &globals{tls: tc.files}
		got := g.connHint(tc.msg)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%+v %q: hint %q, want one with %q", tc.files, tc.msg, got, tc.want)
		}
	}
}
