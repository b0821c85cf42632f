package hashing

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestShardOfStableAndSpread(t *testing.T) {
	// Pinned values (FNV-1a 64, checked independently): the mapping must
	// never change, or every key moves to another shard.
	for _, tc := range []struct {
		key    string
		shards int
		want   int
	}{
		{"user:42", 64, 2},
		{"10.0.0.1", 64, 13},
		{"user:42", 7, 0},
		{"", 64, 37},
		{"a", 1, 0},
	} {
		if got := ShardOf(tc.key, tc.shards); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.key, tc.shards, got, tc.want)
		}
	}
	counts := make([]int, 64)
	for i := 0; i < 64000; i++ {
		counts[ShardOf(fmt.Sprintf("user-%d", i), 64)]++
	}
	for s, c := range counts {
		if c < 800 || c > 1200 {
			t.Errorf("shard %d got %d of 64000 keys, want about 1000", s, c)
		}
	}
}

func TestRendezvousMovesFewest(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	const shards, r = 256, 3
	before := make([][]string, shards)
	for s := range before {
		before[s] = Rendezvous(s, nodes, r)
		if len(before[s]) != r {
			t.Fatalf("shard %d: %d replicas, want %d", s, len(before[s]), r)
		}
	}
	// Removing n2 only replaces n2 where it was; everything else stays.
	after := []string{"n1", "n3", "n4"}
	for s := range before {
		got := Rendezvous(s, after, r)
		want := slices.DeleteFunc(slices.Clone(before[s]), func(id string) bool { return id == "n2" })
		for _, id := range want {
			if !slices.Contains(got, id) {
				t.Fatalf("shard %d: %v lost %s after removing n2 (was %v)", s, got, id, before[s])
			}
		}
	}
	// Preferred leaders spread evenly over the nodes.
	lead := map[string]int{}
	for s := range before {
		lead[before[s][0]]++
	}
	for _, id := range nodes {
		if math.Abs(float64(lead[id])-64) > 24 {
			t.Errorf("node %s preferred leader of %d of 256 shards, want about 64", id, lead[id])
		}
	}
}

func TestRendezvousCapsAtNodeCount(t *testing.T) {
	got := Rendezvous(3, []string{"only"}, 3)
	if !slices.Equal(got, []string{"only"}) {
		t.Fatalf("got %v", got)
	}
	if got := Rendezvous(3, nil, 3); len(got) != 0 {
		t.Fatalf("got %v from no nodes", got)
	}
}

// A hash tag puts every key with it in one shard, whatever follows; a key
// without one (or with an unclosed one) hashes whole, as it always has.
func TestShardOfHashTag(t *testing.T) {
	const shards = 1024
	tag := ShardOf("shop", shards)
	spread := map[int]bool{}
	for i := range 200 {
		key := fmt.Sprintf("user=%d", i)
		if got := ShardOf("\x00shop\x00"+key, shards); got != tag {
			t.Fatalf("%s behind the tag: shard %d, want the tag's %d", key, got, tag)
		}
		if got := ShardOfBytes([]byte("\x00shop\x00"+key), shards); got != tag {
			t.Fatalf("%s as bytes: shard %d, want %d", key, got, tag)
		}
		spread[ShardOf(key, shards)] = true
	}
	if len(spread) < 150 {
		t.Fatalf("untagged keys fell in %d shards of %d", len(spread), shards)
	}
	if a, b := ShardOf("\x00unclosed-a", shards), ShardOf("\x00unclosed-b", shards); a == b && a == ShardOf("unclosed", shards) {
		t.Fatalf("an unclosed tag must hash the whole key")
	}
}
