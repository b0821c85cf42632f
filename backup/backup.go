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

// MaxRecord bounds one record, so that a reader holds a bounded amount
// at once; a save cuts a group's states into as many records as it takes.
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
	// StatesAt is the byte offset in the file of each States record, so
	// that an error inside one can say where it is.
	StatesAt []int
}

// MaxSize bounds a backup a node restores (it holds it in memory).
const MaxSize = 1 << 30

// endLen is the end of a backup: the end record's kind and the checksum.
const endLen = 1 + 4

// Read reads a whole backup from r and checks it before returning.
func Read(r io.Reader) (*Backup, error) {
	data, err := ReadAll(r)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// ReadAll reads the bytes of a backup from r, refusing (ErrBadBackup) one
// over MaxSize as soon as it has read one byte more: a huge file or
// stream costs no more than that.
func ReadAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBadBackup, MaxSize)
	}
	return data, nil
}

// Parse checks and decodes a backup held in memory. It walks the records
// to the end record first, so an error says what is wrong and where: a
// record cut short, a checksum that does not match, bytes after the end.
func Parse(data []byte) (*Backup, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadBackup, fmt.Sprintf(format, args...))
	}
	switch {
	case len(data) > MaxSize:
		return nil, bad("over %d bytes", MaxSize)
	case len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b:
		// snapshot save's own example compresses the backup.
		return nil, bad("no backup header: the file is gzip-compressed (gunzip -c FILE | floodgatectl snapshot restore -)")
	case len(data) < len(magic)+1 || string(data[:len(magic)]) != magic:
		return nil, bad("no backup header")
	case data[len(magic)] != version:
		return nil, bad("backup version %d; this floodgate reads version %d", data[len(magic)], version)
	}
	type span struct {
		kind           byte
		off, body, end int
	}
	var recs []span
	off := len(magic) + 1
	for {
		if off >= len(data) {
			return nil, bad("truncated at byte %d: no end record and checksum", len(data))
		}
		kind := data[off]
		if kind == kindEnd {
			break
		}
		n, k := binary.Uvarint(data[off+1:])
		switch {
		case k <= 0:
			return nil, bad("record at byte %d: its length is cut short or unreadable: the file is truncated or damaged", off)
		case n > MaxRecord:
			return nil, bad("record at byte %d: length %d is over %d: the file is damaged", off, n, MaxRecord)
		case n > uint64(len(data)-off-1-k):
			return nil, bad("record at byte %d: its %d bytes run past the end of the file at byte %d: the file is truncated or damaged", off, n, len(data))
		}
		recs = append(recs, span{kind, off, off + 1 + k, off + 1 + k + int(n)})
		off += 1 + k + int(n)
	}
	// off is the end record: its checksum covers every byte before it.
	sumAt := off + 1
	switch {
	case len(data)-off < endLen:
		return nil, bad("truncated at byte %d: the checksum at byte %d is cut short", len(data), sumAt)
	case binary.BigEndian.Uint32(data[sumAt:]) != crc32.Checksum(data[:off], castagnoli):
		extra := ""
		if trail := len(data) - off - endLen; trail > 0 {
			extra = fmt.Sprintf(", and %d bytes follow it", trail)
		}
		return nil, bad("checksum mismatch: the checksum at byte %d does not match bytes 0 to %d%s: the file is damaged", sumAt, off, extra)
	case len(data) > off+endLen:
		return nil, bad("%d trailing bytes after the checksum: the backup ends at byte %d", len(data)-off-endLen, off+endLen)
	}
	out := &Backup{}
	for _, r := range recs {
		body := data[r.body:r.end]
		switch r.kind {
		case kindPolicies:
			var list pb.ListPoliciesResponse
			if err := proto.Unmarshal(body, &list); err != nil {
				return nil, bad("policies at byte %d: %v", r.off, err)
			}
			out.Policies = append(out.Policies, list.Policies...)
		case kindStates:
			out.States = append(out.States, body)
			out.StatesAt = append(out.StatesAt, r.off)
		default:
			return nil, bad("record at byte %d: kind %d", r.off, r.kind)
		}
	}
	return out, nil
}
