package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// setKeyring installs exactly the keys asked for, the first primary, and
// refuses a bad list without touching the ring.
func TestSetKeyring(t *testing.T) {
	a, b, c := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 16), bytes.Repeat([]byte{3}, 24)
	for _, tc := range []struct {
		name      string
		start     [][]byte
		set, want [][]byte
		err       string
	}{
		{name: "add a second key", start: keysOf(a), set: keysOf(a, b), want: keysOf(a, b)},
		{name: "make it first", start: keysOf(a, b), set: keysOf(b, a), want: keysOf(b, a)},
		{name: "drop the old one", start: keysOf(b, a), set: keysOf(b), want: keysOf(b)},
		{name: "drop several, keep order", start: keysOf(a, b, c), set: keysOf(c, a), want: keysOf(c, a)},
		{name: "drop the primary", start: keysOf(a, b), set: keysOf(b), want: keysOf(b)},
		{name: "all new", start: keysOf(a), set: keysOf(c), want: keysOf(c)},
		{name: "same", start: keysOf(a, b), set: keysOf(a, b), want: keysOf(a, b)},
		{name: "none", start: keysOf(a), set: nil, want: keysOf(a), err: "gossip-key: no key"},
		{name: "a bad key", start: keysOf(a), set: keysOf(b, []byte("short")), want: keysOf(a), err: "gossip-key: key 2: key size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := memberlist.NewKeyring(tc.start[1:], tc.start[0])
			if err != nil {
				t.Fatal(err)
			}
			err = setKeyring(k, tc.set)
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrConfig)):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if got := k.GetKeys(); !slices.EqualFunc(got, tc.want, bytes.Equal) {
				t.Errorf("keys %v, want %v", got, tc.want)
			}
		})
	}
}

// heard records the messages a gossip member received.
type heard struct {
	mu   sync.Mutex
	msgs map[string]bool
}

func (h *heard) got(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs[msg]
}

// talkingMember starts a gossip member named id with keys that records
// the messages it receives.
func talkingMember(t *testing.T, id string, keys ...[]byte) (*gossip, *heard) {
	t.Helper()
	h := &heard{msgs: map[string]bool{}}
	cfg := Config{NodeID: id, GossipAddr: loopback(t), GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipKeys: keys,
		Logger: slog.New(slog.DiscardHandler)}.WithDefaults()
	g, err := startGossip(cfg, "", nil, func(b []byte) {
		h.mu.Lock()
		h.msgs[string(b)] = true
		h.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	return g, h
}

// A pool rotates its gossip key in three rounds, member after member:
// after every member's step, each member still reads what every other
// sends. Then a member with the old key alone is kept out, and one with
// the new key joins.
func TestGossipKeyRotation(t *testing.T) {
	old, nw := bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{8}, 32)
	var pool []*gossip
	var ears []*heard
	for _, id := range []string{"a", "b", "c"} {
		g, h := talkingMember(t, id, old)
		pool, ears = append(pool, g), append(ears, h)
	}
	for _, g := range pool[1:] {
		if err := g.join([]string{pool[0].ml.LocalNode().Address()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range pool {
		for _, o := range pool {
			for deadline := time.Now().Add(5 * time.Second); !g.alive(o.self); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s does not see %s", g.self, o.self)
				}
			}
		}
	}
	// everyoneHears sends a message of step from each member to the
	// others (again every 50ms: UDP) until each has heard all of them.
	everyoneHears := func(step string) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for {
			missing := ""
			for _, g := range pool {
				msg := step + " from " + g.self
				for i, o := range pool {
					if o != g && !ears[i].got(msg) {
						missing = o.self + " has not heard " + msg
						g.send([]byte(msg))
					}
				}
			}
			if missing == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal(missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	everyoneHears("before")
	for _, round := range []struct {
		name string
		keys [][]byte
	}{{"add the new key", keysOf(old, nw)}, {"put it first", keysOf(nw, old)}, {"drop the old", keysOf(nw)}} {
		for _, g := range pool {
			if err := setKeyring(g.keyring, round.keys); err != nil {
				t.Fatal(err)
			}
			everyoneHears(round.name + ", " + g.self + " done")
		}
	}
	stale := gossipWith(t, "stale", old)
	if err := stale.join([]string{pool[0].ml.LocalNode().Address()}); err == nil || pool[0].alive("stale") {
		t.Error("a member with the dropped key joined")
	}
	fresh := gossipWith(t, "fresh", nw)
	if err := fresh.join([]string{pool[0].ml.LocalNode().Address()}); err != nil {
		t.Fatalf("a member with the new key: %v", err)
	}
}
