package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// Record types: the first byte of a record's payload.
const (
	recAppend     byte = 1 // one StoreLogs call
	recDelete     byte = 2 // one DeleteRange call
	recSet        byte = 3 // one stable key
	recCheckpoint byte = 4 // every group's stable keys
	recDrop       byte = 5 // a group deleted
	recReset      byte = 6 // a group's whole log, rewritten by GC
	recBatch      byte = 7 // the records of one group-commit write (batch.go)
	recFence      byte = 8 // a version 3 segment's fence, after its header; never appended (segment.go)
)

const (
	recHeaderSize = 12
	// maxPayload bounds a record so that a damaged length can never make
	// replay allocate gigabytes, and offsets fit in 32 bits.
	maxPayload = 1 << 30
	// entryFlagTime marks an entry whose AppendedAt is set.
	entryFlagTime = 1
)

// payloadLimit is maxPayload; tests lower it to reach it cheaply.
var payloadLimit uint32 = maxPayload

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Why a record could not be read; replay tells torn writes from damage by
// them.
var (
	errShortHeader = errors.New("record header cut short")
	errHeaderCRC   = errors.New("record header checksum mismatch")
	errPastEnd     = errors.New("record runs past the end of the file")
	errPayloadCRC  = errors.New("record checksum mismatch")
	errTooLarge    = errors.New("record larger than any written")
	errMalformed   = errors.New("malformed record")
)

// encoder builds one record in place: header first, filled in by finish.
type encoder struct{ b []byte }

func newEncoder(typ byte, sizeHint int) *encoder {
	e := &encoder{b: make([]byte, recHeaderSize, recHeaderSize+1+sizeHint)}
	e.b = append(e.b, typ)
	return e
}

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *encoder) bytes(p []byte) {
	e.uvarint(uint64(len(p)))
	e.b = append(e.b, p...)
}

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

// finish writes the header and returns the whole record.
func (e *encoder) finish() []byte {
	p := e.b[recHeaderSize:]
	binary.LittleEndian.PutUint32(e.b[0:], uint32(len(p)))
	binary.LittleEndian.PutUint32(e.b[4:], checksum(p))
	binary.LittleEndian.PutUint32(e.b[8:], checksum(e.b[:8]))
	return e.b
}

// entrySpan is where one entry's bytes lie inside its record.
type entrySpan struct{ off, n uint32 }

// encodeEntries writes the body of an append or reset record: group, first
// index, count, then each entry length-prefixed; it returns each entry's
// span relative to the record's start.
func encodeEntries(typ byte, group string, logs []*raft.Log) ([]byte, []entrySpan) {
	size := len(group) + 16
	for _, l := range logs {
		size += len(l.Data) + len(l.Extensions) + 32
	}
	e := newEncoder(typ, size)
	e.str(group)
	e.uvarint(logs[0].Index)
	e.uvarint(uint64(len(logs)))
	spans := make([]entrySpan, len(logs))
	var tmp []byte
	for i, l := range logs {
		tmp = appendEntry(tmp[:0], l)
		e.uvarint(uint64(len(tmp)))
		spans[i] = entrySpan{off: uint32(len(e.b)), n: uint32(len(tmp))}
		e.b = append(e.b, tmp...)
	}
	return e.finish(), spans
}

// encodeRaw builds a reset record from entries already encoded (read back
// from a segment).
func encodeRaw(group string, first uint64, raws [][]byte) ([]byte, []entrySpan) {
	size := len(group) + 16
	for _, r := range raws {
		size += len(r) + 4
	}
	e := newEncoder(recReset, size)
	e.str(group)
	e.uvarint(first)
	e.uvarint(uint64(len(raws)))
	spans := make([]entrySpan, len(raws))
	for i, r := range raws {
		e.uvarint(uint64(len(r)))
		spans[i] = entrySpan{off: uint32(len(e.b)), n: uint32(len(r))}
		e.b = append(e.b, r...)
	}
	return e.finish(), spans
}

// appendEntry encodes one entry (its index is implied by its place):
// crc32c of the rest | term | type | flags | [appended at] | data | extensions.
func appendEntry(b []byte, l *raft.Log) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.AppendUvarint(b, l.Term)
	var flags byte
	if !l.AppendedAt.IsZero() {
		flags |= entryFlagTime
	}
	b = append(b, byte(l.Type), flags)
	if flags&entryFlagTime != 0 {
		b = binary.AppendVarint(b, l.AppendedAt.UnixNano())
	}
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	b = append(b, l.Extensions...)
	binary.LittleEndian.PutUint32(b[start:], checksum(b[start+4:]))
	return b
}

// decodeEntry fills out from an entry's bytes (copied: b may be reused).
func decodeEntry(b []byte, index uint64, out *raft.Log) error {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != checksum(b[4:]) {
		return fmt.Errorf("%w: entry %d checksum mismatch", ErrCorrupt, index)
	}
	d := decoder{b: b[4:]}
	term := d.uvarint()
	typ := d.byte()
	flags := d.byte()
	var at time.Time
	if flags&entryFlagTime != 0 {
		at = time.Unix(0, d.varint())
	}
	data := d.bytes()
	ext := d.bytes()
	if d.err != nil || len(d.b) != 0 {
		return fmt.Errorf("%w: entry %d malformed", ErrCorrupt, index)
	}
	*out = raft.Log{Index: index, Term: term, Type: raft.LogType(typ), AppendedAt: at}
	if len(data) > 0 {
		out.Data = append([]byte(nil), data...)
	}
	if len(ext) > 0 {
		out.Extensions = append([]byte(nil), ext...)
	}
	return nil
}

// parseRecord reads the record at the start of b, in a segment whose
// records are salted with salt, returning its payload and whole length.
func parseRecord(b []byte, salt uint32) (payload []byte, n int, err error) {
	return parseFramed(b, salt)
}

// parseFramed is parseRecord of a record whose header checksum is XORed
// with mark: its segment's salt for a record of its own, innerMark inside
// a batch.
func parseFramed(b []byte, mark uint32) (payload []byte, n int, err error) {
	if len(b) < recHeaderSize {
		return nil, 0, errShortHeader
	}
	if binary.LittleEndian.Uint32(b[8:]) != checksum(b[:8])^mark {
		return nil, 0, errHeaderCRC
	}
	size := binary.LittleEndian.Uint32(b[0:])
	if size == 0 || size > payloadLimit {
		return nil, 0, errTooLarge
	}
	n = recHeaderSize + int(size)
	if n > len(b) {
		return nil, 0, errPastEnd
	}
	payload = b[recHeaderSize:n]
	if binary.LittleEndian.Uint32(b[4:]) != checksum(payload) {
		return nil, n, errPayloadCRC
	}
	return payload, n, nil
}

// decoder reads a payload; the first error sticks and later reads return
// zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err, d.b = errMalformed, nil }

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// bytes returns a length-prefixed field, aliasing the payload.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str() string { return string(d.bytes()) }

// record is a decoded payload; which fields are set depends on typ.
type record struct {
	typ      byte
	group    string
	first    uint64      // append, reset
	spans    []entrySpan // append, reset: relative to the record's start
	min, max uint64      // delete
	key, val []byte      // set
	kvs      []groupKV   // checkpoint
}

// groupKV is one stable key of one group.
type groupKV struct {
	group    string
	key, val []byte
}

// decodeRecord parses a payload whose checksum held. An unknown type is
// refused: a newer floodgate wrote this log.
func decodeRecord(p []byte) (record, error) {
	d := decoder{b: p}
	r := record{typ: d.byte()}
	switch r.typ {
	case recAppend, recReset:
		r.group = d.str()
		r.first = d.uvarint()
		count := d.uvarint()
		if count == 0 || count > uint64(len(d.b)) {
			d.fail()
		}
		r.spans = make([]entrySpan, 0, count)
		for i := uint64(0); i < count && d.err == nil; i++ {
			n := d.uvarint()
			if d.err != nil || n > uint64(len(d.b)) || n < 4 {
				d.fail()
				break
			}
			r.spans = append(r.spans, entrySpan{off: uint32(recHeaderSize + len(p) - len(d.b)), n: uint32(n)})
			d.b = d.b[n:]
		}
	case recDelete:
		r.group = d.str()
		r.min, r.max = d.uvarint(), d.uvarint()
	case recSet:
		r.group = d.str()
		r.key, r.val = d.bytes(), d.bytes()
	case recCheckpoint:
		count := d.uvarint()
		if count > uint64(len(d.b)) {
			d.fail()
		}
		for i := uint64(0); i < count && d.err == nil; i++ {
			r.kvs = append(r.kvs, groupKV{group: d.str(), key: d.bytes(), val: d.bytes()})
		}
	case recDrop:
		r.group = d.str()
	default:
		return r, fmt.Errorf("unknown record type %d (written by a newer floodgate?)", r.typ)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail()
	}
	return r, d.err
}

func encodeDelete(group string, min, max uint64) []byte {
	e := newEncoder(recDelete, len(group)+24)
	e.str(group)
	e.uvarint(min)
	e.uvarint(max)
	return e.finish()
}

func encodeSet(group string, key, val []byte) []byte {
	e := newEncoder(recSet, len(group)+len(key)+len(val)+16)
	e.str(group)
	e.bytes(key)
	e.bytes(val)
	return e.finish()
}

func encodeCheckpoint(kvs []groupKV) []byte {
	e := newEncoder(recCheckpoint, 64*len(kvs))
	e.uvarint(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.group)
		e.bytes(kv.key)
		e.bytes(kv.val)
	}
	return e.finish()
}

func encodeDrop(group string) []byte {
	e := newEncoder(recDrop, len(group)+8)
	e.str(group)
	return e.finish()
}
