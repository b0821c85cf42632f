package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/floodgate/floodgate/raftlog"
)

// joiningFile marks a data dir that asked a cluster to take it and has
// no Raft state yet: it holds the addresses the join goes through, one a
// line. It is written before the first AddNode, since a cluster may take
// the node (AddNode committed) without the node hearing so (a timeout, a
// crash mid-call). A node stopped in that window starts with no Raft
// state; without the mark it would forget the cluster and, started
// without --join as `floodgatectl join` has it, create a cluster of its
// own, while the cluster it joined lists it as a member and sends it
// replicas and clients. With the mark it asks again (a member record is
// taken back as it is: same id and incarnation). It goes once the node
// has Raft state of its own, or when a member refuses the join (nothing
// was taken).
const joiningFile = "joining"

// markJoining records, before anything is asked, that a join through
// addrs is under way.
func markJoining(dir string, addrs []string) error {
	return writeDurable(filepath.Join(dir, joiningFile), []byte(strings.Join(addrs, "\n")+"\n"))
}

// joiningVia returns the addresses of a join that stopped before its Raft
// state arrived, or nil (no join under way).
func joiningVia(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, joiningFile))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// joined removes the mark: the node is a member with Raft state of its
// own, which says from now on which cluster it is of, or it was refused.
func joined(dir string) error {
	if err := os.Remove(filepath.Join(dir, joiningFile)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return raftlog.SyncDir(dir)
}
