package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "floodgatectl ") || !strings.Contains(out.String(), "go1.") {
		t.Fatalf("version printed %q", out.String())
	}
}

func TestVersionCommandJSON(t *testing.T) {
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs([]string{"version", "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Go string }
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version == "" || !strings.HasPrefix(v.Go, "go1.") {
		t.Fatalf("version --json printed %q: %v", out.String(), err)
	}
}

func TestKeygen(t *testing.T) {
	keys := map[string]bool{}
	for range 2 {
		var out bytes.Buffer
		root := newRoot(&out)
		root.SetArgs([]string{"keygen"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out.String()))
		if err != nil || len(k) != 32 {
			t.Fatalf("keygen printed %q: %v", out.String(), err)
		}
		keys[string(k)] = true
	}
	if len(keys) != 2 {
		t.Fatal("keygen printed the same key twice")
	}
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs([]string{"keygen", "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var j struct{ Key string }
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("keygen --json printed %q: %v", out.String(), err)
	}
	if k, err := base64.StdEncoding.DecodeString(j.Key); err != nil || len(k) != 32 {
		t.Fatalf("keygen --json printed %q: %v", out.String(), err)
	}
}
