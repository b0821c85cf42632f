package cluster

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// addrBook tells every Raft group of the node where a server is now: the
// Raft address the meta state lists for that node. A group's
// configuration keeps the address a server had when it was added, and a
// pod restarted with a new IP (same data, same id) would be dialed at its
// old one forever; the meta state follows the node's own report.
type addrBook struct{ n *Node }

// ServerAddr implements raft.ServerAddressProvider. An unknown id (meta
// not loaded yet, a server the meta state never listed) errs, and raft
// then dials the configuration's address.
func (b addrBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	m := b.n.metaState()
	if m == nil {
		return "", fmt.Errorf("raft address of %s: meta state not loaded", id)
	}
	if node := m.View().Node(string(id)); node != nil && node.RaftAddr != "" {
		return raft.ServerAddress(node.RaftAddr), nil
	}
	return "", fmt.Errorf("raft address of %s: not in the meta state", id)
}
