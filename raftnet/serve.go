package raftnet

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// accept hands each connection a peer dials to this node to serve.
func (n *Network) accept() {
	defer n.wg.Done()
	for {
		conn, err := n.cfg.Layer.Accept()
		if err != nil {
			select {
			case <-n.stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			n.log.Warn("raftnet: accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.serve(conn)
		}()
	}
}

// serve runs an accepted connection until it or the network closes.
func (n *Network) serve(conn net.Conn) {
	// Watched from the start: Close waits for this goroutine, and a peer
	// silent at its hello would hold it for the hello's whole deadline.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-n.stop:
			conn.Close()
		case <-stop:
		}
	}()
	_ = conn.SetDeadline(time.Now().Add(n.cfg.Timeout))
	use, err := readHello(conn, n.cluster(), n.cfg.Admit)
	_ = conn.SetDeadline(time.Time{})
	if errors.Is(err, ErrOtherCluster) {
		host, _, _ := net.SplitHostPort(conn.RemoteAddr().String()) // its port changes at each dial
		n.warnRefusal(host, "raftnet: refused a peer of another cluster", "remote", conn.RemoteAddr(), "err", err)
	}
	if err != nil {
		n.log.Debug("raftnet: handshake refused", "remote", conn.RemoteAddr(), "err", err)
		conn.Close()
		return
	}
	if use == useSnapshot {
		n.serveSnapshot(conn)
		return
	}
	n.serveLink(conn)
}

// serveLink answers the calls a peer sends on its link to this node:
// heartbeats at once, the rest through each group's session, in order.
func (n *Network) serveLink(conn net.Conn) {
	w := newWriter(conn, n.cfg.Timeout)
	sessions := map[string]*session{}
	defer func() {
		conn.Close()
		for _, s := range sessions {
			s.close()
		}
		w.close(raft.ErrTransportShutdown)
	}()
	r := bufio.NewReaderSize(conn, readBuffer)
	var buf []byte
	for {
		f, b, err := readFrame(r, buf)
		buf = b
		if err != nil {
			return
		}
		if f.kind != kindRequest {
			n.log.Warn("raftnet: not a request on an inbound link", "remote", conn.RemoteAddr(), "kind", f.kind)
			return
		}
		if f.rpc == rpcInstallSnapshot {
			// Its data travels on a connection of its own: raft would read a
			// nil Reader (and panic) if this one reached it.
			_ = w.add(func(b []byte) ([]byte, error) {
				return appendResponse(b, f.id, nil, fmt.Errorf("raftnet: InstallSnapshot on a link")), nil
			})
			continue
		}
		cmd, err := decodeRequest(f.rpc, f.body)
		if err != nil {
			// The peer's bug, or another version: answer it, keep the link.
			_ = w.add(func(b []byte) ([]byte, error) { return appendResponse(b, f.id, nil, err), nil })
			continue
		}
		t := n.group(f.group)
		if t == nil {
			_ = w.add(func(b []byte) ([]byte, error) {
				return appendResponse(b, f.id, nil, fmt.Errorf("raftnet: no group %q on this node", f.group)), nil
			})
			continue
		}
		if ae, ok := cmd.(*raft.AppendEntriesRequest); ok && isHeartbeat(ae) {
			if fn := t.heartbeatHandler(); fn != nil {
				resp, err := heartbeat(fn, ae)
				_ = w.add(func(b []byte) ([]byte, error) { return appendResponse(b, f.id, resp, err), nil })
				continue
			}
		}
		s := sessions[f.group]
		if s == nil || s.t != t { // the group was closed and opened again
			if s != nil {
				s.close()
			}
			forgetEnded(sessions)
			s = newSession(t, w)
			sessions[f.group] = s
		}
		s.submit(f.id, cmd)
	}
}

// forgetEnded drops the sessions of groups that closed: a link outlives
// many groups (every group ever moved off or removed from this node).
func forgetEnded(sessions map[string]*session) {
	for name, s := range sessions {
		select {
		case <-s.done:
			delete(sessions, name)
		default:
		}
	}
}

// heartbeat runs raft's heartbeat handler, which answers at once, or not
// at all when its group is shutting down.
func heartbeat(fn func(raft.RPC), cmd *raft.AppendEntriesRequest) (any, error) {
	ch := make(chan raft.RPCResponse, 1)
	fn(raft.RPC{Command: cmd, RespChan: ch})
	select {
	case r := <-ch:
		return r.Response, r.Error
	default:
		return nil, raft.ErrTransportShutdown
	}
}
