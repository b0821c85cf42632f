package cluster

import (
	"bytes"
	"log/slog"
	"testing"
	"time"
)

// gossipWith starts a gossip member named id with key (nil: plaintext).
func gossipWith(t *testing.T, id string, key []byte) *gossip {
	t.Helper()
	cfg := Config{NodeID: id, GossipAddr: loopback(t), GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipKey: key,
		Logger: slog.New(slog.DiscardHandler)}.WithDefaults()
	g, err := startGossip(cfg, nil)
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
