package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/floodgate/floodgate/raftlog"
)

// joiningFile marks a data dir a cluster has taken (AddNode committed,
// the cluster file and the incarnation's acceptance written) whose Raft
// state has not arrived yet: it holds the address of the member that
// took it. A node stopped in that window (a crash, SIGTERM, a join that
// timed out) starts with no Raft state; without the mark it would forget
// the cluster and, started without --join as `floodgatectl join` has it,
// create a cluster of its own, while the cluster it joined lists it as a
// member and sends it replicas and clients. With the mark it joins again
// (the member record is taken back as it is: same id and incarnation).
const joiningFile = "joining"

// markJoining records, before the dir is accepted, that a join through
// addr is under way.
func markJoining(dir, addr string) error {
	return writeDurable(filepath.Join(dir, joiningFile), []byte(addr+"\n"))
}

// joiningVia returns the address a join stopped before its Raft state
// arrived went through, or "" (no join under way).
func joiningVia(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, joiningFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// joined removes the mark: the node is a member with Raft state of its
// own, which says from now on which cluster it is of.
func joined(dir string) error {
	if err := os.Remove(filepath.Join(dir, joiningFile)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return raftlog.SyncDir(dir)
}
