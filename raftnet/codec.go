package raftnet

//lint:file-ignore SA1019 hashicorp/raft still sets and reads the deprecated Leader and Candidate fields: the codec carries every field raft has.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// RPC types, as they travel in request frames.
const (
	rpcAppendEntries byte = iota + 1
	rpcRequestVote
	rpcRequestPreVote
	rpcTimeoutNow
	rpcInstallSnapshot
)

// maxEntries bounds the entries of one AppendEntries a decoder accepts
// (raft sends at most MaxAppendEntries, 64 by default, 1024 at most).
const maxEntries = 1 << 16

// errShort is a body that ends before its fields do.
var errShort = errors.New("raftnet: body too short")

// enc appends fields to a buffer.
type enc struct{ b []byte }

func (e *enc) u64(v uint64)   { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) i64(v int64)    { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte) { e.u64(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) flag(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *enc) header(h raft.RPCHeader) {
	e.i64(int64(h.ProtocolVersion))
	e.bytes(h.ID)
	e.bytes(h.Addr)
}

// dec reads fields from a body; the first error sticks and later reads
// return zero values.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *dec) u64() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i64() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a copy: the frame buffer is reused, and raft keeps what it
// is given (log data, addresses).
func (d *dec) bytes() []byte {
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	if n == 0 {
		return nil
	}
	v := make([]byte, n)
	copy(v, d.b)
	d.b = d.b[n:]
	return v
}

func (d *dec) flag() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 {
		d.fail(errShort)
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	if v > 1 {
		d.fail(fmt.Errorf("raftnet: bad boolean %d", v))
	}
	return v == 1
}

func (d *dec) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(d.i64()), ID: d.bytes(), Addr: d.bytes()}
}

// done fails a body with bytes left over: a peer that adds fields speaks
// another version of the protocol, which the handshake should have told.
func (d *dec) done() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("raftnet: %d bytes past the end of a body", len(d.b)))
	}
	return d.err
}

// appendTime encodes a log's AppendedAt: 0 for the zero time, else Unix
// nanoseconds (raft uses it only for metrics).
func (e *enc) time(t time.Time) {
	if t.IsZero() {
		e.i64(0)
		return
	}
	e.i64(t.UnixNano())
}

func (d *dec) time() time.Time {
	n := d.i64()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// encodeRequest appends the body of request cmd and returns its RPC type.
func encodeRequest(b []byte, cmd any) ([]byte, byte, error) {
	e := enc{b}
	var t byte
	switch r := cmd.(type) {
	case *raft.AppendEntriesRequest:
		t = rpcAppendEntries
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.bytes(r.Leader)
		e.u64(r.PrevLogEntry)
		e.u64(r.PrevLogTerm)
		e.u64(r.LeaderCommitIndex)
		e.u64(uint64(len(r.Entries)))
		for _, l := range r.Entries {
			e.u64(l.Index)
			e.u64(l.Term)
			e.b = append(e.b, byte(l.Type))
			e.bytes(l.Data)
			e.bytes(l.Extensions)
			e.time(l.AppendedAt)
		}
	case *raft.RequestVoteRequest:
		t = rpcRequestVote
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.bytes(r.Candidate)
		e.u64(r.LastLogIndex)
		e.u64(r.LastLogTerm)
		e.flag(r.LeadershipTransfer)
	case *raft.RequestPreVoteRequest:
		t = rpcRequestPreVote
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.u64(r.LastLogIndex)
		e.u64(r.LastLogTerm)
	case *raft.TimeoutNowRequest:
		t = rpcTimeoutNow
		e.header(r.RPCHeader)
	case *raft.InstallSnapshotRequest:
		t = rpcInstallSnapshot
		e.header(r.RPCHeader)
		e.i64(int64(r.SnapshotVersion))
		e.u64(r.Term)
		e.bytes(r.Leader)
		e.u64(r.LastLogIndex)
		e.u64(r.LastLogTerm)
		e.bytes(r.Peers)
		e.bytes(r.Configuration)
		e.u64(r.ConfigurationIndex)
		e.i64(r.Size)
	default:
		return b, 0, fmt.Errorf("raftnet: cannot send %T", cmd)
	}
	return e.b, t, nil
}

// decodeRequest decodes the body of a request of RPC type t.
func decodeRequest(t byte, body []byte) (any, error) {
	d := dec{b: body}
	var cmd any
	switch t {
	case rpcAppendEntries:
		r := &raft.AppendEntriesRequest{RPCHeader: d.header(), Term: d.u64(), Leader: d.bytes(),
			PrevLogEntry: d.u64(), PrevLogTerm: d.u64(), LeaderCommitIndex: d.u64()}
		n := d.u64()
		if n > maxEntries || n > uint64(len(d.b)) { // each entry takes a few bytes at least
			d.fail(fmt.Errorf("raftnet: %d entries in an AppendEntries", n))
			n = 0
		}
		if n > 0 {
			logs := make([]raft.Log, n)
			r.Entries = make([]*raft.Log, n)
			for i := range logs {
				l := &logs[i]
				l.Index, l.Term = d.u64(), d.u64()
				if d.err == nil && len(d.b) == 0 {
					d.fail(errShort)
				}
				if d.err == nil {
					l.Type = raft.LogType(d.b[0])
					d.b = d.b[1:]
					if l.Type > raft.LogConfiguration {
						// raft panics when it commits a type it does not know.
						d.fail(fmt.Errorf("raftnet: entry of unknown type %d", l.Type))
					}
				}
				l.Data, l.Extensions, l.AppendedAt = d.bytes(), d.bytes(), d.time()
				if d.err == nil && l.Type == raft.LogConfiguration {
					d.fail(configurationError(l.Data))
				}
				r.Entries[i] = l
			}
		}
		cmd = r
	case rpcRequestVote:
		cmd = &raft.RequestVoteRequest{RPCHeader: d.header(), Term: d.u64(), Candidate: d.bytes(),
			LastLogIndex: d.u64(), LastLogTerm: d.u64(), LeadershipTransfer: d.flag()}
	case rpcRequestPreVote:
		cmd = &raft.RequestPreVoteRequest{RPCHeader: d.header(), Term: d.u64(), LastLogIndex: d.u64(), LastLogTerm: d.u64()}
	case rpcTimeoutNow:
		cmd = &raft.TimeoutNowRequest{RPCHeader: d.header()}
	case rpcInstallSnapshot:
		r := &raft.InstallSnapshotRequest{RPCHeader: d.header(), SnapshotVersion: raft.SnapshotVersion(d.i64()),
			Term: d.u64(), Leader: d.bytes(), LastLogIndex: d.u64(), LastLogTerm: d.u64(), Peers: d.bytes(),
			Configuration: d.bytes(), ConfigurationIndex: d.u64(), Size: d.i64()}
		if d.err == nil && r.Size < 0 {
			d.fail(fmt.Errorf("raftnet: snapshot size %d", r.Size))
		}
		if d.err == nil && r.SnapshotVersion > 0 {
			d.fail(configurationError(r.Configuration))
		}
		cmd = r
	default:
		return nil, fmt.Errorf("raftnet: unknown RPC type %d", t)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// configurationError is why raft cannot decode configuration b, or nil.
// raft decodes what a peer sends it (a configuration entry it appends, a
// snapshot's configuration) with DecodeConfiguration, which panics: one
// such frame would kill the node.
func configurationError(b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("raftnet: a configuration raft cannot decode: %v", r)
		}
	}()
	raft.DecodeConfiguration(b)
	return nil
}

// newResponse returns the response struct for RPC type t.
func newResponse(t byte) any {
	switch t {
	case rpcAppendEntries:
		return &raft.AppendEntriesResponse{}
	case rpcRequestVote:
		return &raft.RequestVoteResponse{}
	case rpcRequestPreVote:
		return &raft.RequestPreVoteResponse{}
	case rpcTimeoutNow:
		return &raft.TimeoutNowResponse{}
	case rpcInstallSnapshot:
		return &raft.InstallSnapshotResponse{}
	}
	return nil
}

// encodeResponse appends the body of response resp.
func encodeResponse(b []byte, resp any) ([]byte, error) {
	e := enc{b}
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.u64(r.LastLog)
		e.flag(r.Success)
		e.flag(r.NoRetryBackoff)
	case *raft.RequestVoteResponse:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.bytes(r.Peers)
		e.flag(r.Granted)
	case *raft.RequestPreVoteResponse:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.flag(r.Granted)
	case *raft.TimeoutNowResponse:
		e.header(r.RPCHeader)
	case *raft.InstallSnapshotResponse:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.flag(r.Success)
	default:
		return b, fmt.Errorf("raftnet: cannot send response %T", resp)
	}
	return e.b, nil
}

// decodeResponse decodes body into resp, a pointer from newResponse or
// the caller's.
func decodeResponse(body []byte, resp any) error {
	d := dec{b: body}
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		return settle(&d, r, raft.AppendEntriesResponse{RPCHeader: d.header(), Term: d.u64(), LastLog: d.u64(), Success: d.flag(), NoRetryBackoff: d.flag()})
	case *raft.RequestVoteResponse:
		return settle(&d, r, raft.RequestVoteResponse{RPCHeader: d.header(), Term: d.u64(), Peers: d.bytes(), Granted: d.flag()})
	case *raft.RequestPreVoteResponse:
		return settle(&d, r, raft.RequestPreVoteResponse{RPCHeader: d.header(), Term: d.u64(), Granted: d.flag()})
	case *raft.TimeoutNowResponse:
		return settle(&d, r, raft.TimeoutNowResponse{RPCHeader: d.header()})
	case *raft.InstallSnapshotResponse:
		return settle(&d, r, raft.InstallSnapshotResponse{RPCHeader: d.header(), Term: d.u64(), Success: d.flag()})
	default:
		return fmt.Errorf("raftnet: cannot decode into %T", resp)
	}
}

// settle stores v in dst when the body decoded whole, else the zero value:
// raft's pipeline reads resp.Success, never the future's error.
func settle[T any](d *dec, dst *T, v T) error {
	if err := d.done(); err != nil {
		var zero T
		*dst = zero
		return err
	}
	*dst = v
	return nil
}

// Bounds on what a frame adds to an AppendEntries' variable-length
// fields: the frame's head (length, kind, id, RPC type, group name) and
// the request's numbers and lengths, and each entry's.
const (
	appendOverhead = 512
	entryOverhead  = 64
)

// sendBatch is about the most bytes of entries a frame carries (one
// entry at least, up to maxFrame): a frame holds up every other group's
// messages on its link while it is written, heartbeats among them, and a
// follower catching up behind a slot move's imports was sent 64 of them
// at once. A variable only for tests.
var sendBatch uint32 = 8 << 20

// fitEntries trims r.Entries, in place, to the longest prefix (one entry
// at least) whose frame fits in sendBatch and maxFrame. raft batches
// entries by count only, so a follower behind a few slot moves' imports
// (up to 64 MiB each from an older release) was sent them together, over
// maxFrame, and the request was refused at every retry: the follower
// never caught up. raft advances by the request it gave once the call
// returns (updateLastAppended after a plain call or a pipelined answer,
// pipelineSend's next index), reading r.Entries, so it sends the rest
// next time.
func fitEntries(r *raft.AppendEntriesRequest) {
	bound := int(min(sendBatch, maxFrame))
	size := appendOverhead + len(r.RPCHeader.ID) + len(r.RPCHeader.Addr) + len(r.Leader)
	for i, l := range r.Entries {
		size += entryOverhead + len(l.Data) + len(l.Extensions)
		if size > bound && i > 0 {
			r.Entries = r.Entries[:i]
			return
		}
	}
}

// isHeartbeat reports whether an AppendEntries is a heartbeat, as
// NetworkTransport tells it: raft's heartbeat handler may answer it ahead
// of the group's queue.
func isHeartbeat(r *raft.AppendEntriesRequest) bool {
	leader := r.RPCHeader.Addr
	if len(leader) == 0 {
		leader = r.Leader
	}
	return r.Term != 0 && leader != nil && r.PrevLogEntry == 0 && r.PrevLogTerm == 0 &&
		len(r.Entries) == 0 && r.LeaderCommitIndex == 0
}
