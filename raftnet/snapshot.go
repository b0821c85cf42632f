package raftnet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// timeoutScale is the snapshot size per Timeout a transfer may take, as in
// NetworkTransport: a 1 GiB snapshot gets 4096 timeouts, not one.
const timeoutScale = 256 << 10

// installSnapshot sends a snapshot on a connection of its own: its data
// would hold up every other group's frames on the link.
func (t *Transport) installSnapshot(addr raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	conn, err := t.n.dial(addr, useSnapshot)
	if err != nil {
		return err
	}
	defer conn.Close()
	timeout := t.n.cfg.Timeout
	if timeout > 0 {
		_ = conn.SetDeadline(time.Now().Add(timeout * time.Duration(max(1, args.Size/timeoutScale))))
	}
	bw := bufio.NewWriterSize(conn, readBuffer)
	frame, _, err := appendRequest(nil, 0, t.group, args)
	if err != nil {
		return err
	}
	if _, err := bw.Write(frame); err != nil {
		return err
	}
	if n, err := io.CopyN(bw, data, args.Size); err != nil {
		return fmt.Errorf("raftnet: snapshot data to %s: %d of %d bytes: %w", addr, n, args.Size, err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	f, _, err := readFrame(bufio.NewReader(conn), nil)
	switch {
	case err != nil:
		return err
	case f.kind == kindError:
		return fmt.Errorf("%s", f.body)
	case f.kind != kindResponse:
		return fmt.Errorf("raftnet: snapshot answered with frame kind %d", f.kind)
	}
	return decodeResponse(f.body, resp)
}

// serveSnapshot takes one InstallSnapshot and its data to its group.
func (n *Network) serveSnapshot(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReaderSize(conn, readBuffer)
	if n.cfg.Timeout > 0 {
		// A peer that opens the connection and says nothing more must not
		// hold this goroutine until the network closes.
		_ = conn.SetReadDeadline(time.Now().Add(n.cfg.Timeout))
	}
	f, _, err := readFrame(r, nil)
	if err != nil || f.kind != kindRequest || f.rpc != rpcInstallSnapshot {
		return
	}
	answer := func(resp any, err error) { _, _ = conn.Write(appendResponse(nil, f.id, resp, err)) }
	cmd, err := decodeRequest(f.rpc, f.body)
	if err != nil {
		answer(nil, err)
		return
	}
	t := n.group(f.group)
	if t == nil {
		answer(nil, fmt.Errorf("raftnet: no group %q on this node", f.group))
		return
	}
	args := cmd.(*raft.InstallSnapshotRequest)
	if timeout := n.cfg.Timeout; timeout > 0 {
		_ = conn.SetDeadline(time.Now().Add(timeout * time.Duration(max(1, args.Size/timeoutScale))))
	}
	resp, err := t.deliver(cmd, io.LimitReader(r, args.Size))
	answer(resp, err)
}
