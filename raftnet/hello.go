package raftnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The handshake. The dialer sends helloMagic, its protocol version, the
// connection's use and (from version 2) the cluster it belongs to: a
// length byte and the id, empty while it knows none. A node that speaks
// raftnet answers helloMagic, the version, whether it takes the
// connection and its own cluster. An older release's mux closes a
// connection for a layer it does not know, and a node of version 1
// closes a hello of version 2: no answer means "use NetworkTransport".
// A node of another cluster answers with a refusal, never silence, so
// that it is not reached through NetworkTransport instead: raft would
// take its answers for a member's, and it would take the other
// cluster's log for its own (a member's address reused by a node of
// another cluster, as pods' and VMs' are).
var helloMagic = [4]byte{'F', 'G', 'R', 'N'}

const (
	protocolVersion byte = 2
	// protocolV1 is the hello of releases before the cluster was in it,
	// still taken: it carries no cluster, as a fresh node's.
	protocolV1  byte = 1
	useLink     byte = 'L' // a link: framed calls of every group
	useSnapshot byte = 'S' // one InstallSnapshot and its data
)

// The answer's status.
const (
	helloTaken   byte = 0
	helloRefused byte = 1 // the dialer's cluster is not the node's
	helloHeld    byte = 2 // the node takes no peer yet (RefuseHeld)
)

// maxClusterID bounds the cluster id a hello carries (its length byte).
const maxClusterID = 255

// errNotSpoken is a peer that closed the connection at the handshake: it
// does not speak raftnet.
var errNotSpoken = errors.New("raftnet: peer does not speak raftnet")

// ErrOtherCluster is a handshake refused because the two nodes belong to
// different clusters, by either side. Its calls fail with it: the peer
// is neither reached through NetworkTransport nor waited for. Admit may
// return it (wrapped) itself: package cluster's refusals do.
var ErrOtherCluster = errors.New("node of another cluster")

// otherCluster marks admit's refusal err as ErrOtherCluster, once.
func otherCluster(err error) error {
	if errors.Is(err, ErrOtherCluster) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrOtherCluster, err)
}

// errHeld is a peer whose Raft port takes no peer yet: a call waits for
// it as for a peer that is down (unreached).
var errHeld = errors.New("raftnet: peer takes no peer yet (a data dir no cluster has taken)")

// RefuseHeld answers the raftnet hello on conn as a node whose Raft port
// takes no peer yet (a data dir no cluster has taken: the node's mux
// holds it), then closes conn. Closed without an answer, the dialer would
// take it for an older release and call it through NetworkTransport once
// the port takes peers, where no handshake names a cluster.
func RefuseHeld(conn net.Conn, timeout time.Duration) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	_, _ = readHello(conn, "", func(string) error { return errHeld })
}

// sendHello starts a connection for use as a node of cluster and waits
// within timeout for the answer, which admit judges by the peer's
// cluster.
func sendHello(rw io.ReadWriter, use byte, cluster string, admit func(string) error,
	setDeadline func(time.Time) error, timeout time.Duration) error {
	if len(cluster) > maxClusterID {
		return fmt.Errorf("raftnet: cluster id of %d bytes, at most %d", len(cluster), maxClusterID)
	}
	_ = setDeadline(time.Now().Add(timeout))
	defer setDeadline(time.Time{})
	hello := append(helloMagic[:], protocolVersion, use, byte(len(cluster)))
	if _, err := rw.Write(append(hello, cluster...)); err != nil {
		return closedAtHello(err)
	}
	var ack [7]byte
	if _, err := io.ReadFull(rw, ack[:5]); err != nil {
		return closedAtHello(err)
	}
	if [4]byte(ack[:4]) != helloMagic || ack[4] != protocolVersion {
		return fmt.Errorf("%w: answered %q", errNotSpoken, ack[:5])
	}
	theirs, err := readClusterID(rw, ack[5:])
	switch {
	case err != nil:
		return fmt.Errorf("raftnet: handshake answer: %w", err)
	case ack[5] == helloRefused:
		return fmt.Errorf("%w: it belongs to cluster %q and refuses this node of cluster %q", ErrOtherCluster, theirs, cluster)
	case ack[5] == helloHeld:
		return errHeld
	case ack[5] != helloTaken:
		return fmt.Errorf("raftnet: handshake answer of unknown status %d", ack[5])
	}
	if admit != nil {
		if err := admit(theirs); err != nil {
			return otherCluster(err)
		}
	}
	return nil
}

// closedAtHello is errNotSpoken for a connection the peer closed at the
// handshake (a node of version 1 closes it after the version, before
// the rest of the hello is read), else err.
func closedAtHello(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) || isReset(err) {
		return errNotSpoken
	}
	return err
}

// readHello reads a dialer's hello and answers it as a node of cluster,
// refusing a dialer that admit refuses by its cluster; it returns the
// connection's use.
func readHello(rw io.ReadWriter, cluster string, admit func(string) error) (byte, error) {
	var hello [6]byte
	if _, err := io.ReadFull(rw, hello[:]); err != nil {
		return 0, err
	}
	if [4]byte(hello[:4]) != helloMagic {
		return 0, fmt.Errorf("raftnet: bad hello %q", hello[:])
	}
	version, use := hello[4], hello[5]
	if version != protocolVersion && version != protocolV1 {
		return 0, fmt.Errorf("raftnet: protocol version %d, this node speaks %d", version, protocolVersion)
	}
	if use != useLink && use != useSnapshot {
		return 0, fmt.Errorf("raftnet: unknown connection use %q", use)
	}
	if len(cluster) > maxClusterID { // its length would not fit its byte
		return 0, fmt.Errorf("raftnet: cluster id of %d bytes, at most %d", len(cluster), maxClusterID)
	}
	var theirs string
	if version == protocolVersion {
		var n [1]byte
		var err error
		if theirs, err = readClusterID(rw, n[:]); err != nil {
			return 0, fmt.Errorf("raftnet: hello: %w", err)
		}
	}
	refused := error(nil)
	if admit != nil {
		refused = admit(theirs)
	}
	if version == protocolV1 {
		if refused != nil { // closed: NetworkTransport's turn, as before
			return 0, refused
		}
		_, err := rw.Write(append(helloMagic[:], protocolV1))
		return use, err
	}
	status := helloTaken
	switch {
	case errors.Is(refused, errHeld):
		status = helloHeld
	case refused != nil:
		status = helloRefused
	}
	ack := append(helloMagic[:], protocolVersion, status, byte(len(cluster)))
	if _, err := rw.Write(append(ack, cluster...)); err != nil {
		return 0, err
	}
	switch {
	case status == helloHeld:
		return 0, refused
	case refused != nil:
		return 0, otherCluster(refused)
	}
	return use, nil
}

// readClusterID reads hdr, whose last byte is the length of the cluster
// id that follows, and then the id.
func readClusterID(r io.Reader, hdr []byte) (string, error) {
	if _, err := io.ReadFull(r, hdr); err != nil {
		return "", err
	}
	id := make([]byte, hdr[len(hdr)-1])
	if _, err := io.ReadFull(r, id); err != nil {
		return "", err
	}
	return string(id), nil
}
