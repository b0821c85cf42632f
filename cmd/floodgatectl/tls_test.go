package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tls create writes certificates that verify as the flags use them: the
// node's for its hosts under the cluster CA, each client's under the
// client CA and not the cluster's.
func TestTLSCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs([]string{"tls", "create", "--dir", dir, "--hosts", "127.0.0.1,node.local", "--clients", "ops,checkout"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	pool := func(name string) *x509.CertPool {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(b) {
			t.Fatalf("%s holds no certificate", name)
		}
		return p
	}
	leaf := func(name string) *x509.Certificate {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cluster, clients := pool("ca.crt"), pool("client-ca.crt")
	node := leaf("node")
	for _, host := range []string{"127.0.0.1", "node.local"} {
		if _, err := node.Verify(x509.VerifyOptions{Roots: cluster, DNSName: host}); err != nil {
			t.Errorf("node certificate for %s: %v", host, err)
		}
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: cluster, DNSName: "elsewhere"}); err == nil {
		t.Error("the node certificate verifies for a host it was not made for")
	}
	for _, name := range []string{"ops", "checkout"} {
		c := leaf(name)
		if c.Subject.CommonName != name {
			t.Errorf("%s: common name %q", name, c.Subject.CommonName)
		}
		opts := x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		opts.Roots = clients
		if _, err := c.Verify(opts); err != nil {
			t.Errorf("%s under the client CA: %v", name, err)
		}
		opts.Roots = cluster
		if _, err := c.Verify(opts); err == nil {
			t.Errorf("%s verifies under the cluster CA: a client would pass for a node", name)
		}
	}
	if !strings.Contains(out.String(), "ops.crt") {
		t.Fatalf("printed %q", out.String())
	}
	root = newRoot(&out)
	root.SetArgs([]string{"tls", "create", "--dir", dir, "--clients", "../evil"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--clients") {
		t.Fatalf("a client name with a path: %v", err)
	}
}

// A refused tls create changes nothing: the CAs and certificates already
// in --dir stay (new CAs would no longer verify the certificates issued
// before), and --json prints what was written as JSON.
func TestTLSCreateRefusesBeforeWriting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRoot(&out)
		root.SetArgs(append([]string{"tls", "create", "--dir", dir}, args...))
		err := root.Execute()
		return out.String(), err
	}
	out, err := run("--json", "--clients", "ops")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Dir   string   `json:"dir"`
		Files []string `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Dir != dir || !slices.Contains(res.Files, "ops.key") {
		t.Fatalf("tls create --json printed %q: %v", out, err)
	}
	read := func() map[string]string {
		files := map[string]string{}
		for _, name := range res.Files {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			files[name] = string(b)
		}
		return files
	}
	before := read()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--clients", "ops,../evil"}, "--clients"},
		{[]string{"--clients", "ops,ops"}, `--clients: "ops" given twice`},
		{[]string{"--hosts", " , "}, "--hosts"},
	} {
		if _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
		if after := read(); !maps.Equal(before, after) {
			t.Errorf("%v: refused, yet the files in --dir changed", tc.args)
		}
	}
}

// tls create --json, as every command takes it: the directory and the
// files written, as JSON.
func TestTLSCreateJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs([]string{"tls", "create", "--dir", dir, "--clients", "ops", "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Dir   string   `json:"dir"`
		Files []string `json:"files"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("printed %q, not JSON: %v", out.String(), err)
	}
	want := []string{"ca.crt", "client-ca.crt", "node.crt", "node.key", "ops.crt", "ops.key"}
	if got.Dir != dir || !slices.Equal(got.Files, want) {
		t.Fatalf("printed %+v, want dir %s and files %v", got, dir, want)
	}
}
