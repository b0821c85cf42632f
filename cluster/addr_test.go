package cluster

import (
	"errors"
	"strings"
	"testing"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

func TestCheckAddr(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:7700", "[::1]:7700", "node-1.example.com:1", ":7700", "nowhere.invalid:65535"} {
		if err := CheckAddr("join", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, tc := range []struct{ addr, want string }{
		{"", `join: "" is not host:port`},
		{"garbage", `join: "garbage" is not host:port`},
		{"127.0.0.1", "is not host:port"},
		{"a:b:c", "is not host:port"},
		{"host:0", "port must be a number from 1"},
		{"host:65536", "port must be"},
		{"host:-1", "port must be"},
		{"host:http", "port must be"},
		{"bad host:80", "host must be"},
		{"a/b:80", "host must be"},
		{strings.Repeat("h", 256) + ":80", "host must be"},
		{strings.Repeat("h", 1<<20), "1048576 bytes is too long"},
	} {
		err := CheckAddr("join", tc.addr)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.addr, err, tc.want)
		}
	}
	if err := CheckListenAddr("grpc-addr", "127.0.0.1:0"); err != nil {
		t.Errorf("listen on any port: %v", err)
	}
}

func TestCheckNode(t *testing.T) {
	good := func() *metav1.Node {
		return &metav1.Node{Id: "n9", GrpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3"}
	}
	if err := checkNode(good()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(n *metav1.Node)
		want string
	}{
		{"no id", func(n *metav1.Node) { n.Id = "" }, "node.id: required"},
		{"huge raft address", func(n *metav1.Node) { n.RaftAddr = strings.Repeat("a", 1<<20) }, "node.raft_addr: 1048576 bytes"},
		{"id with a space", func(n *metav1.Node) { n.Id = "n 9" }, "node.id:"},
		{"huge id", func(n *metav1.Node) { n.Id = strings.Repeat("n", 1<<20) }, "node.id: 1048576 bytes"},
		{"no grpc", func(n *metav1.Node) { n.GrpcAddr = "" }, "node.grpc_addr:"},
		{"garbage raft", func(n *metav1.Node) { n.RaftAddr = "garbage" }, "node.raft_addr:"},
		{"garbage gossip", func(n *metav1.Node) { n.GossipAddr = "x:y" }, "node.gossip_addr:"},
		{"garbage http", func(n *metav1.Node) { n.HttpAddr = "::" }, "node.http_addr:"},
		{"huge region", func(n *metav1.Node) { n.Region = strings.Repeat("r", 500) }, "node.region:"},
		{"region with a control character", func(n *metav1.Node) { n.Region = "eu\x01" }, "node.region:"},
		{"huge version", func(n *metav1.Node) { n.Version = strings.Repeat("v", 500) }, "node.version:"},
		{"negative log cap", func(n *metav1.Node) { n.MaxLogLength = -1 }, "node.max_log_length: must be between 0 and 1000000, got -1"},
		{"huge log cap", func(n *metav1.Node) { n.MaxLogLength = 1 << 40 }, "node.max_log_length:"},
	} {
		n := good()
		tc.edit(n)
		err := checkNode(n)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: a %d-byte message", tc.name, len(err.Error()))
		}
	}
	if err := checkNode(nil); err == nil || !strings.Contains(err.Error(), "node: required") {
		t.Errorf("nil node: %v", err)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7700": true, "127.0.0.9:1": true, "[::1]:7700": true, "localhost:7700": true,
		":7700": false, "0.0.0.0:7700": false, "10.0.0.1:7700": false, "[::]:7700": false, "node-1:7700": false, "garbage": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
