package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// keysOf is a list of gossip keys.
func keysOf(keys ...[]byte) [][]byte {
	var out [][]byte
	for _, k := range keys {
		if k != nil {
			out = append(out, k)
		}
	}
	return out
}

// gossipWith starts a gossip member named id with key (nil: plaintext).
func gossipWith(t *testing.T, id string, key []byte) *gossip {
	t.Helper()
	cfg := Config{NodeID: id, GossipAddr: loopback(t), GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipKeys: keysOf(key),
		Logger: slog.New(slog.DiscardHandler)}.WithDefaults()
	g, err := startGossip(cfg, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	return g
}

// With --gossip-key, members holding the key see each other, and a member
// without it, or with another key, joins none of them: it can neither
// read the pool's state nor be taken for a member.
func TestGossipKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	a, b := gossipWith(t, "a", key), gossipWith(t, "b", key)
	if err := b.join([]string{a.ml.LocalNode().Address()}); err != nil {
		t.Fatalf("same key: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !a.alive("b") || !b.alive("a") {
		if time.Now().After(deadline) {
			t.Fatal("members with the same key never saw each other")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, k := range map[string][]byte{"no key": nil, "another key": bytes.Repeat([]byte{9}, 32)} {
		c := gossipWith(t, "c-"+name, k)
		if err := c.join([]string{a.ml.LocalNode().Address()}); err == nil {
			t.Errorf("%s: joined a pool with a key", name)
		}
		if a.alive(c.self) || c.alive("a") {
			t.Errorf("%s: taken for a member", name)
		}
	}
}

// A joining node proves it holds the cluster's gossip key (or that it has
// none); every mismatch is refused as final (ErrConfig), naming the flag,
// and a node of an older release, which proves nothing, is let through.
func TestCheckGossipKey(t *testing.T) {
	key, other := bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{9}, 16)
	cases := []struct {
		name    string
		cluster [][]byte
		proof   GossipProof
		want    string // "" for accepted
	}{
		{"same key", keysOf(key), ProveGossipKey(key, "n4"), ""},
		{"neither has a key", nil, ProveGossipKey(nil, "n4"), ""},
		{"older release, cluster with a key", keysOf(key), GossipProof{}, ""},
		{"older release, no key", nil, GossipProof{}, ""},
		{"another key", keysOf(key), ProveGossipKey(other, "n4"), "gossip_key: node n4's --gossip-key is not this cluster's"},
		{"no key, cluster with one", keysOf(key), ProveGossipKey(nil, "n4"), "gossip_key: this cluster encrypts its gossip, and node n4 has no --gossip-key"},
		{"a key, cluster without", nil, ProveGossipKey(key, "n4"), "gossip_key: node n4 has a --gossip-key, but this cluster's gossip is not encrypted"},
		{"proof made for another node", keysOf(key), ProveGossipKey(key, "n5"), "is not this cluster's"},
		{"short mac", keysOf(key), GossipProof{Given: true, MAC: []byte{1, 2, 3}}, "gossip_key.mac: 3 bytes, want 32"},
		{"a key of a rotation", keysOf(other, key), ProveGossipKey(key, "n4"), ""},
		{"the new key of a rotation", keysOf(other, key), ProveGossipKey(other, "n4"), ""},
		{"short mac, no key", nil, GossipProof{Given: true, MAC: []byte{1, 2, 3}}, "gossip_key.mac: 3 bytes, want 32"},
	}
	for _, c := range cases {
		err := checkGossipKey(c.cluster, "n4", c.proof)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: accepted", c.name)
		case c.want != "" && !errors.Is(err, ErrConfig):
			t.Errorf("%s: %v is not final (ErrConfig)", c.name, err)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %q does not say %q", c.name, err, c.want)
		}
	}
}
