package backup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

const (
	magic   = "FGBK"
	version = 1

	kindEnd      = 0
	kindPolicies = 1
	kindStates   = 2
)

// MaxRecord bounds one record: a group's states travel in one Raft entry.
const MaxRecord = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadBackup marks a file that is not a whole backup this binary reads.
var ErrBadBackup = errors.New("not a valid floodgate backup")

// Writer writes a backup.
type Writer struct {
	w   io.Writer
	crc hash.Hash32
	err error
}

// NewWriter starts a backup on w.
func NewWriter(w io.Writer) *Writer {
	b := &Writer{w: w, crc: crc32.New(castagnoli)}
	b.write(append([]byte(magic), version))
	return b
}

func (b *Writer) write(p []byte) {
	if b.err != nil {
		return
	}
	if _, b.err = b.w.Write(p); b.err == nil {
		b.crc.Write(p)
	}
}

func (b *Writer) record(kind byte, body []byte) error {
	if len(body) > MaxRecord {
		return fmt.Errorf("backup: a record of %d bytes is over %d", len(body), MaxRecord)
	}
	b.write(binary.AppendUvarint([]byte{kind}, uint64(len(body))))
	b.write(body)
	return b.err
}

// Policies writes the cluster's policies.
func (b *Writer) Policies(ps []*pb.Policy) error {
	body, err := proto.Marshal(&pb.ListPoliciesResponse{Policies: ps})
	if err != nil {
		return err
	}
	return b.record(kindPolicies, body)
}

// States writes one group's states (fsm.Shard.ExportAll).
func (b *Writer) States(states []byte) error { return b.record(kindStates, states) }

// Close writes the checksum; the backup is whole only after it.
func (b *Writer) Close() error {
	sum := b.crc.Sum32()
	b.write([]byte{kindEnd})
	if b.err == nil {
		_, b.err = b.w.Write(binary.BigEndian.AppendUint32(nil, sum))
	}
	return b.err
}

// Backup is a read backup.
type Backup struct {
	Policies []*pb.Policy
	States   [][]byte // one per group
}

// MaxSize bounds a backup a node restores (it holds it in memory).
const MaxSize = 1 << 30

// Read reads a whole backup from r and checks it before returning.
func Read(r io.Reader) (*Backup, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse checks and decodes a backup held in memory.
func Parse(data []byte) (*Backup, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadBackup, fmt.Sprintf(format, args...))
	}
	switch {
	case len(data) > MaxSize:
		return nil, bad("over %d bytes", MaxSize)
	case len(data) < len(magic)+1+5 || string(data[:len(magic)]) != magic:
		return nil, bad("no backup header")
	case data[len(magic)] != version:
		return nil, bad("backup version %d; this floodgate reads version %d", data[len(magic)], version)
	}
	end := len(data) - 5
	if data[end] != kindEnd {
		return nil, bad("truncated: no checksum at the end")
	}
	if binary.BigEndian.Uint32(data[end+1:]) != crc32.Checksum(data[:end], castagnoli) {
		return nil, bad("checksum mismatch: the file is damaged")
	}
	out := &Backup{}
	off := len(magic) + 1
	for off < end {
		kind := data[off]
		n, k := binary.Uvarint(data[off+1 : end])
		if k <= 0 || n > MaxRecord || n > uint64(end-off-1-k) {
			return nil, bad("record at byte %d: length", off)
		}
		body := data[off+1+k : off+1+k+int(n)]
		switch kind {
		case kindPolicies:
			var list pb.ListPoliciesResponse
			if err := proto.Unmarshal(body, &list); err != nil {
				return nil, bad("policies at byte %d: %v", off, err)
			}
			out.Policies = append(out.Policies, list.Policies...)
		case kindStates:
			out.States = append(out.States, body)
		default:
			return nil, bad("record at byte %d: kind %d", off, kind)
		}
		off += 1 + k + int(n)
	}
	return out, nil
}
