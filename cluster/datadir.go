package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/raftlog"
)

// claimDataDir records which node owns dir, and refuses another node id:
// starting node B on node A's data would make B impersonate A in every
// Raft group.
func claimDataDir(dir, id string) error {
	path := filepath.Join(dir, "node-id")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if got := strings.TrimSpace(string(b)); got != id {
			return fmt.Errorf("%w: node-id: data dir %s belongs to node %q, not %q", ErrConfig, dir, got, id)
		}
		return nil
	case os.IsNotExist(err):
		// Durably: the incarnation written next syncs the dir, and a file
		// whose contents had not reached the disk by a power cut would come
		// back empty, belonging to node "", and the node could not start.
		return writeDurable(path, []byte(id+"\n"))
	default:
		return err
	}
}

// ReadNodeID returns the node id recorded in dataDir, or "".
func ReadNodeID(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, "node-id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// loadIncarnation returns the id of the data dir's life, written when the
// dir was first opened by a release that keeps one (a dir of an earlier
// release gets one then): a node whose data dir was lost and started
// afresh under its old --node-id has another, and the cluster then tells
// it from the member it was (checkIncarnation).
// created says the id was made now, and is not written yet (Open writes
// it, saveIncarnation, once it has judged the dir's Raft state): no member
// record can hold it yet.
func loadIncarnation(dir string) (id string, created bool, err error) {
	path := filepath.Join(dir, incarnationFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !validIncarnation(id) || id == "" {
			return "", false, fmt.Errorf("%w: data-dir: %s holds %q, not 32 hex digits: restore it from the file it replaced, or see the README's Guarantees on a lost data dir", ErrConfig, path, id)
		}
		return id, false, nil
	case os.IsNotExist(err):
		var r [16]byte
		_, _ = rand.Read(r[:])
		return hex.EncodeToString(r[:]), true, nil
	default:
		return "", false, fmt.Errorf("data-dir: %w", err)
	}
}

// saveIncarnation writes id, made by loadIncarnation, into dir.
func saveIncarnation(dir, id string) error {
	if err := writeDurable(filepath.Join(dir, incarnationFile), []byte(id+"\n")); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	return nil
}

// incarnationFile holds a data dir's incarnation (loadIncarnation).
const incarnationFile = "incarnation"

// writeDurable writes a small file whole (a temporary file renamed into
// place) and syncs it and its directory, so a crash leaves it whole or
// absent.
func writeDurable(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return raftlog.SyncDir(filepath.Dir(path))
}

// acceptedFile marks a data dir whose incarnation the cluster took: its
// Raft state is then its own life's, and its Raft port serves peers from
// the start (Mux.held). Without it, Raft state in a dir that holds an
// incarnation is not known to be its own (Start refuses it).
const acceptedFile = "incarnation.accepted"

// markAccepted records that the cluster took this data dir's incarnation.
func markAccepted(dir string) error {
	if accepted(dir) {
		return nil
	}
	return writeDurable(filepath.Join(dir, acceptedFile), []byte("accepted\n"))
}

// accept records that the cluster took this node's data dir, then opens
// its Raft port to peers (Mux.held). Not the other way round: a restart
// that found Raft state without the mark would refuse to start (Start).
func (n *Node) accept() error {
	if err := markAccepted(n.cfg.DataDir); err != nil {
		return err
	}
	n.mux.Admit()
	return nil
}

// accepted reports whether markAccepted ran on dir.
func accepted(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, acceptedFile))
	return err == nil
}

// validIncarnation reports whether id is an incarnation as a member record
// holds it: 32 lowercase hex digits, or empty (a release before them).
func validIncarnation(id string) bool {
	if id == "" {
		return true
	}
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// checkIncarnation refuses node as the member old when its data dir is
// not old's: the member's Raft votes and log went with the dir it lost, so
// taking its place would let it vote twice in a term, or count toward a
// quorum entries it no longer holds (an acknowledged strict check could
// then be lost, and a limit exceeded). A record without an incarnation (a
// release before them, on either side) cannot be told apart, and is
// taken.
func checkIncarnation(old, node *metav1.Node) error {
	if old == nil || old.Incarnation == "" || node.Incarnation == "" || old.Incarnation == node.Incarnation {
		return nil
	}
	return fmt.Errorf("%w: node.incarnation: %s is a member whose data dir was another (incarnation %s, this one %s): its Raft votes and log are gone with it. Take the old member out first (floodgatectl leave %s, from any node), then start this one again",
		ErrConfig, node.Id, old.Incarnation, node.Incarnation, node.Id)
}

// keyCurrentTerm is the stable key under which hashicorp/raft keeps a
// group's term: written each time the group opens (0 until it has one),
// and at every new term.
var keyCurrentTerm = []byte("CurrentTerm")

// keyLastVoteTerm is the stable key of the term of a group's last vote.
var keyLastVoteTerm = []byte("LastVoteTerm")

// checkStateKept refuses a data dir the cluster took (acceptedFile) whose
// Raft state is gone: its shared log deleted or replaced, the rest of the
// dir kept. Its incarnation would let it back in as the member it was, a
// voter that forgot its votes and the entries it acknowledged: a quorum
// counting it could elect a leader without an acknowledged strict check,
// and the limit be exceeded. Raft writes the meta group's term each time
// the group opens, and a dir is accepted only once its meta group is
// open: an accepted dir whose log holds none lost it, unless a join is
// still under way (joiningFile: nothing acknowledged yet; a fresh node's
// JoinCluster marks it before it drops its own meta log) or the state is
// in an older layout that opening the meta group moves into the shared
// log. Checked before any group opens, which would write the term again.
func checkStateKept(dir string, wal *raftlog.Store) error {
	if !accepted(dir) || joiningVia(dir) != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, metaName, boltFile)); err == nil {
		return nil
	}
	_, err := wal.Group(metaName).GetUint64(keyCurrentTerm)
	if !errors.Is(err, raftlog.ErrKeyNotFound) {
		return err
	}
	return fmt.Errorf("%w: data-dir: %s was taken by its cluster (%s) but its Raft log (%s) holds no state: it was deleted or replaced, and with it this member's votes and acknowledged entries. "+
		"Take the member out (floodgatectl leave %s, from any other node), empty %s, and start it again with --join: its replicas come back from its peers",
		ErrDamaged, dir, acceptedFile, filepath.Join(dir, walDir), ReadNodeID(dir), dir)
}
