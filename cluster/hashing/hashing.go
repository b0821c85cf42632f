package hashing

import "slices"

// ShardOf returns the shard of key among shards: FNV-1a 64 modulo the
// shard count. Stable forever: changing it would move every key. A key
// that starts with a hash tag, "\x00tag\x00" (a colocated policy's key,
// policy.ColocatedKey), hashes by its tag alone, so every key with one tag
// is in one shard.
func ShardOf(key string, shards int) int { return shardOf(key, shards) }

// ShardOfBytes is ShardOf of a key held as bytes (no copy).
func ShardOfBytes(key []byte, shards int) int { return shardOf(key, shards) }

func shardOf[K string | []byte](key K, shards int) int {
	if shards <= 1 {
		return 0
	}
	if len(key) > 0 && key[0] == 0 {
		for i := 1; i < len(key); i++ {
			if key[i] == 0 {
				key = key[1:i]
				break
			}
		}
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return int(h % uint64(shards))
}

// Rendezvous returns up to n of nodes ranked for shard by rendezvous
// (highest random weight) hashing, best first: the first is the preferred
// leader. Adding or removing a node moves only the replicas it gains or
// held. nodes is not modified.
func Rendezvous(shard int, nodes []string, n int) []string {
	type scored struct {
		id    string
		score uint64
	}
	ranked := make([]scored, len(nodes))
	for i, id := range nodes {
		ranked[i] = scored{id, score(id, shard)}
	}
	slices.SortFunc(ranked, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	n = min(n, len(ranked))
	out := make([]string, n)
	for i := range out {
		out[i] = ranked[i].id
	}
	return out
}

// score hashes (node, shard) with FNV-1a and a splitmix64 finalizer, so
// similar node names still get independent weights.
func score(node string, shard int) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(node); i++ {
		h ^= uint64(node[i])
		h *= 1099511628211
	}
	for s := uint64(shard) + 1; s > 0; s >>= 8 {
		h ^= s & 0xff
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
