package main

import (
	"io"
	"net"
	"strings"
	"testing"
)

func TestAdvertise(t *testing.T) {
	pod := func() ([]net.IP, error) {
		return []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.4.2.7"), net.ParseIP("fe80::1")}, nil
	}
	multi := func() ([]net.IP, error) { return []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("192.168.1.2")}, nil }
	none := func() ([]net.IP, error) { return []net.IP{net.ParseIP("127.0.0.1")}, nil }
	for _, tc := range []struct {
		bind, host string
		ips        func() ([]net.IP, error)
		want, err  string
	}{
		{"127.0.0.1:7700", "", pod, "127.0.0.1:7700", ""},
		{"127.0.0.1:7700", "10.9.9.9", pod, "10.9.9.9:7700", ""},
		{"0.0.0.0:7702", "pod-0.floodgate-headless", pod, "pod-0.floodgate-headless:7702", ""},
		{"0.0.0.0:7702", "", pod, "10.4.2.7:7702", ""},
		{":7703", "", pod, "10.4.2.7:7703", ""},
		{"[::]:7703", "", pod, "10.4.2.7:7703", ""},
		{"0.0.0.0:7700", "", multi, "", "advertise-host: grpc-addr listens on every address"},
		{"0.0.0.0:7700", "", none, "", "no non-loopback IPv4 address"},
		{"garbage", "", pod, "", `grpc-addr: "garbage" is not host:port`},
		{"127.0.0.1:7700", "::1", pod, "[::1]:7700", ""},
		{"127.0.0.1:7700", "0.0.0.0", pod, "", "advertise-host: 0.0.0.0 means every address"},
		{"127.0.0.1:7700", "::", pod, "", "advertise-host: :: means every address"},
		{"127.0.0.1:7700", "bad host", pod, "", `advertise-host: "bad host" is not a host name`},
		{"127.0.0.1:7700", "10.1.2.3:80", pod, "", `advertise-host: "10.1.2.3:80" is not a host name`},
	} {
		got, err := advertise("grpc-addr", tc.bind, tc.host, tc.ips)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %q: got %q, %v; want an error containing %q", tc.bind, tc.host, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %q: got %q, %v; want %q", tc.bind, tc.host, got, err, tc.want)
		}
	}
}

// Gossip advertises an IP even when the others advertise a name:
// memberlist refuses a name, and a pod's name must not stop it.
func TestGossipAdvertise(t *testing.T) {
	pod := func() ([]net.IP, error) { return []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.4.2.7")}, nil }
	for _, tc := range []struct {
		bind, host, advHost string
		want, err           string
	}{
		{"0.0.0.0:7703", "10.4.2.8", "floodgate-0.floodgate-headless.ns.svc.cluster.local", "10.4.2.8:7703", ""},
		{"0.0.0.0:7703", "", "floodgate-0.floodgate-headless.ns.svc.cluster.local", "10.4.2.7:7703", ""},
		{"127.0.0.5:7703", "", "n-0.fg.test", "127.0.0.5:7703", ""},
		{"0.0.0.0:7703", "", "10.9.9.9", "10.9.9.9:7703", ""},
		{"127.0.0.1:7703", "", "", "127.0.0.1:7703", ""},
		{"0.0.0.0:7703", "pod-0.svc", "", "", `advertise-gossip-host: "pod-0.svc" is not an IP address`},
		{"0.0.0.0:7703", "0.0.0.0", "", "", "advertise-gossip-host: 0.0.0.0 means every address"},
		{"localhost:7703", "", "n-0.fg.test", "", "set --advertise-gossip-host"},
	} {
		got, err := gossipAdvertise(tc.bind, tc.host, tc.advHost, pod)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %q %q: got %q, %v; want an error containing %q", tc.bind, tc.host, tc.advHost, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %q %q: got %q, %v; want %q", tc.bind, tc.host, tc.advHost, got, err, tc.want)
		}
	}
}

// A pod's arguments: gRPC, HTTP and Raft advertise its stable name (dialed
// by name, so re-resolved after it moves), gossip its IP.
func TestOptionsAdvertiseName(t *testing.T) {
	name := "floodgate-0.floodgate-headless.default.svc.cluster.local"
	o, err := parseOptions([]string{"--data-dir", t.TempDir(), "--grpc-addr", "0.0.0.0:7700", "--http-addr", "0.0.0.0:7701",
		"--raft-addr", "0.0.0.0:7702", "--gossip-addr", "0.0.0.0:7703", "--advertise-host", name, "--advertise-gossip-host", "10.1.2.3"},
		noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cluster
	if c.GRPCAddr != name+":7700" || c.HTTPAddr != name+":7701" || c.RaftAddr != name+":7702" || c.GossipAddr != "10.1.2.3:7703" {
		t.Fatalf("advertised grpc %s http %s raft %s gossip %s", c.GRPCAddr, c.HTTPAddr, c.RaftAddr, c.GossipAddr)
	}
}
