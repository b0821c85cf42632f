// Package hashing maps keys to shards and shards to nodes. It imports only
// the standard library so the client SDK can route a key to its shard's
// leader exactly as the servers do.
package hashing
