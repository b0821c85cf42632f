package raftnet

import (
	"bufio"
	"fmt"
	"net"

	"github.com/hashicorp/raft"
)

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
			s = newSession(t, w)
			sessions[f.group] = s
		}
		s.submit(f.id, cmd)
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
