package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/floodgate/floodgate/metrics"
	"github.com/floodgate/floodgate/raftlog"
)

// clusterFile names the cluster a data dir's Raft state belongs to. A
// node resuming a cluster of several members learns its cluster's id from
// its meta state only once a leader has told it what is committed (its
// log is not applied before, and its meta group rarely has a snapshot),
// yet it announces itself to its --join addresses at once: it must know
// then whether they are of its cluster.
const clusterFile = "cluster"

// recordCluster writes id into dir's cluster file unless it holds it.
func recordCluster(dir, id string) error {
	if id == "" || recordedCluster(dir) == id {
		return nil
	}
	return writeDurable(filepath.Join(dir, clusterFile), []byte(id+"\n"))
}

// forgetCluster removes dir's cluster file: its cluster was discarded.
func forgetCluster(dir string) error {
	if err := os.Remove(filepath.Join(dir, clusterFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return raftlog.SyncDir(dir)
}

// recordedCluster is the cluster id dir's cluster file holds, or "" (a
// data dir of a release before the file, or a node never a member).
func recordedCluster(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, clusterFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ownCluster is the cluster this node's data dir belongs to: the one its
// meta state names, else the one recorded in its cluster file, else ""
// (also before the meta group is open: raftnet asks from the start).
func (n *Node) ownCluster() string {
	if m := n.metaState(); m != nil {
		if id := m.View().ClusterID; id != "" {
			return id
		}
	}
	return recordedCluster(n.cfg.DataDir)
}

// Cluster is the cluster this node belongs to as its handshakes name it
// (ownCluster): its meta state's, else its data dir's, else "".
func (n *Node) Cluster() string { return n.ownCluster() }

// AdmitPeer judges a node by the cluster it says it belongs to, at a
// Raft handshake: a node of another cluster is refused (ErrOtherCluster),
// one that knows no cluster yet (a fresh node, an older release) or while
// this node knows none is taken. Cluster ids never change once created,
// so the members of one cluster never refuse each other.
func (n *Node) AdmitPeer(cluster string) error {
	if cluster == "" { // taken without a lookup of this node's own
		return nil
	}
	own := n.ownCluster()
	if own == "" || cluster == own {
		return nil
	}
	metrics.OtherClusterRefusals.Inc()
	return fmt.Errorf("%w: a node of cluster %s; this node is of cluster %s", ErrOtherCluster, cluster, own)
}

// otherCluster returns the error for a --join address that answers as a
// member of a cluster other than this node's own, else nil (an address
// that does not answer, a fresh node, this node under another address,
// a member of its own cluster, or a node that knows no cluster yet).
// Adding this node there would make it a member of two clusters: the
// other's meta leader would send its log into this node's Raft groups.
func (n *Node) otherCluster(ctx context.Context, addr string) error {
	own := n.ownCluster()
	if own == "" {
		return nil
	}
	if other := n.clusterAt(ctx, addr); other != "" && other != own {
		return otherClusterError(addr, other, own)
	}
	return nil
}

// clusterAt is the cluster the node at addr says it belongs to: "" when it
// does not answer, is this node, or knows none yet.
func (n *Node) clusterAt(ctx context.Context, addr string) string {
	id, c, err := n.peers.Hello(ctx, addr)
	if err != nil || id == n.cfg.NodeID {
		return ""
	}
	return c
}

func otherClusterError(addr, other, own string) error {
	return fmt.Errorf("%w: join: %s belongs to cluster %s, but this data dir holds cluster %s: "+
		"give --join addresses of %s to resume it, or start with an empty --data-dir to join %s", ErrConfig, addr, other, own, own, other)
}
