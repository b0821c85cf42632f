package cluster

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/hashicorp/memberlist"
)

// gossipKeys are the keys this node's gossip decrypts with, the first the
// one it encrypts with; none when gossip is plaintext.
func (n *Node) gossipKeys() [][]byte {
	if n.gossip.keyring == nil {
		return nil
	}
	return n.gossip.keyring.GetKeys()
}

// gossipKey is the key this node's gossip encrypts with; nil: plaintext.
func (n *Node) gossipKey() []byte {
	if n.gossip.keyring == nil {
		return nil
	}
	return n.gossip.keyring.GetPrimaryKey()
}

// SetGossipKeys makes keys the node's gossip keys while it runs: the first
// encrypts what it sends, every one decrypts what it receives, and a key
// not among them is dropped. A key rotates in three rounds, node after
// node: add the new key after the old, then put it first, then drop the
// old one; each round's keys decrypt what every node encrypts with. A
// node started with plaintext gossip cannot take keys, nor one with keys
// drop them all (the members of a pool either all encrypt or none do):
// that takes a restart of every node. Bad keys change nothing.
func (n *Node) SetGossipKeys(keys [][]byte) error {
	if n.gossip.keyring == nil {
		return fmt.Errorf("%w: gossip-key: this node started with plaintext gossip; encrypting it takes a restart of every node with a key", ErrConfig)
	}
	return setKeyring(n.gossip.keyring, keys)
}

// setKeyring installs keys in k, keys[0] its primary. memberlist's
// RemoveKey shifts the keys after the one it removes in the array that
// decrypting goroutines may be reading: a removed key is made the last
// one first (each UseKey moves a key to the front, into a new array), so
// that removing it writes to no array anyone holds. Meanwhile, for a few
// microseconds, kept keys other than keys[0] encrypt: every peer holds
// them, or this rotation's round would lose messages anyway.
func setKeyring(k *memberlist.Keyring, keys [][]byte) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: gossip-key: no key; a node with encrypted gossip cannot turn to plaintext while it runs", ErrConfig)
	}
	for i, key := range keys {
		if err := memberlist.ValidateKey(key); err != nil {
			return fmt.Errorf("%w: gossip-key: key %d: %w", ErrConfig, i+1, err)
		}
	}
	for _, key := range keys {
		if err := k.AddKey(key); err != nil {
			return err
		}
	}
	kept := func(key []byte) bool {
		return slices.ContainsFunc(keys, func(x []byte) bool { return bytes.Equal(x, key) })
	}
	if !slices.ContainsFunc(k.GetKeys(), func(key []byte) bool { return !kept(key) }) {
		return k.UseKey(keys[0])
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if err := k.UseKey(keys[i]); err != nil {
			return err
		}
	}
	for {
		have := k.GetKeys()
		if len(have) == 0 || kept(have[len(have)-1]) {
			return nil
		}
		if err := k.RemoveKey(have[len(have)-1]); err != nil {
			return err
		}
	}
}
