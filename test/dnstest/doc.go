// Package dnstest is a DNS server for tests: it answers A queries for the
// names a test sets, on UDP loopback, so a test can play a Kubernetes
// headless service (one name, every pod's IP) and change it as pods come
// and go.
package dnstest
