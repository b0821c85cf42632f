package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"slices"
)

// gossipProofLabel is what a proof of the gossip key signs, with the
// node's id: a MAC made for anything else never matches.
const gossipProofLabel = "floodgate gossip key proof v1\x00"

// GossipProof is a joining node's answer to "do you hold this cluster's
// gossip key?". memberlist drops a packet under another key without a
// word, so without it a node with a wrong --gossip-key is added as a
// member, is never heard by gossip, and is listed dead until an operator
// removes it; with it the join is refused at once, naming the flag.
type GossipProof struct {
	// Given is false for a node of an older release, which sends no
	// proof and is not checked.
	Given bool
	// MAC is HMAC-SHA256 under the node's key of gossipProofLabel and
	// its id; empty when the node has no --gossip-key.
	MAC []byte
}

// ProveGossipKey returns the proof that a node named id holds key (nil:
// no key).
func ProveGossipKey(key []byte, id string) GossipProof {
	if len(key) == 0 {
		return GossipProof{Given: true}
	}
	return GossipProof{Given: true, MAC: gossipMAC(key, id)}
}

func gossipMAC(key []byte, id string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(gossipProofLabel))
	m.Write([]byte(id))
	return m.Sum(nil)
}

// CheckGossipProof checks a proof's shape: a MAC is empty or the size
// of an HMAC-SHA256.
func CheckGossipProof(p GossipProof) error {
	if n := len(p.MAC); n != 0 && n != sha256.Size {
		return fmt.Errorf("%w: gossip_key.mac: %d bytes, want %d (or none for a node without --gossip-key)", ErrConfig, n, sha256.Size)
	}
	return nil
}

// checkGossipKey refuses a node named id whose proof shows that its
// --gossip-key is none of keys, this node's (none: gossip in plaintext).
// The refusal is final (ErrConfig): the node must be restarted with the
// cluster's key.
func checkGossipKey(keys [][]byte, id string, p GossipProof) error {
	if err := CheckGossipProof(p); err != nil {
		return err
	}
	switch {
	case !p.Given:
		return nil
	case len(keys) == 0 && len(p.MAC) > 0:
		return fmt.Errorf("%w: gossip_key: node %s has a --gossip-key, but this cluster's gossip is not encrypted: start it without one, or give every node the same key", ErrConfig, id)
	case len(keys) > 0 && len(p.MAC) == 0:
		return fmt.Errorf("%w: gossip_key: this cluster encrypts its gossip, and node %s has no --gossip-key: start it with the cluster's", ErrConfig, id)
	case len(keys) > 0 && !slices.ContainsFunc(keys, func(k []byte) bool { return hmac.Equal(p.MAC, gossipMAC(k, id)) }):
		return fmt.Errorf("%w: gossip_key: node %s's --gossip-key is not this cluster's: start it with the cluster's", ErrConfig, id)
	}
	return nil
}
