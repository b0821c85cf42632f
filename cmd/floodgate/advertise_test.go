package main

import (
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
