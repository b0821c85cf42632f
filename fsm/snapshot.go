package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/hashicorp/raft"
)

// Shard snapshot format, version 1:
//
//	"FGSS" | version (1 byte) | log time (varint) | count (uvarint)
//	count × { identity (uvarint length + bytes)
//	          | state (uvarint length + window encoding) }
//	CRC-32C of everything before (4 bytes, big endian)
//
// Entries are sorted by identity, expired states are left out and what has
// aged out of live ones is dropped, so two replicas that counted the same
// decisions write the same bytes, whatever their hash seeds, how far their
// sweepers got, or whether they applied the decisions as strict checks or
// as replayed fast hits.
//
// Version 2 adds, after the entries, the group's slot ownership record
// (appendOwnership, as uvarint length + bytes). A shard without one (a
// legacy cluster's) still writes version 1, which older binaries read.
const (
	shardMagic        = "FGSS"
	shardVersion      = 2
	shardVersionNoOwn = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// shardSnapshot is a point-in-time copy of a Shard's states, encoded by a
// capture (capture.go) and sorted and written without the shard's lock.
type shardSnapshot struct {
	now     int64
	buf     []byte // the encoded entries, back to back
	entries []snapEntry
	own     []byte // the ownership record; nil writes version 1
}

type snapEntry struct {
	id       string
	off, end int // the entry's bytes in buf
}

// Snapshot implements raft.FSM. It only notes the point in time: Persist
// captures the states, copying on write what applies change meanwhile
// (capture.go), so applies never wait for a copy of every state.
func (s *Shard) Snapshot() (raft.FSMSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &liveSnapshot{s: s, c: s.startCapture(nil)}, nil
}

// add appends r's identity and state.
func (p *shardSnapshot) add(r *record) error {
	l, ok := shapeOf(r.id)
	if !ok {
		return fmt.Errorf("%w: state identity", ErrCorrupt)
	}
	off := len(p.buf)
	p.buf = binary.AppendUvarint(p.buf, uint64(len(r.id)))
	p.buf = append(p.buf, r.id...)
	st := l.AppendState(nil, &r.st)
	p.buf = binary.AppendUvarint(p.buf, uint64(len(st)))
	p.buf = append(p.buf, st...)
	p.entries = append(p.entries, snapEntry{id: r.id, off: off, end: len(p.buf)})
	return nil
}

// addEncoded appends a state's identity and its encoding st, as add does.
func (p *shardSnapshot) addEncoded(id string, st []byte) {
	off := len(p.buf)
	p.buf = binary.AppendUvarint(p.buf, uint64(len(id)))
	p.buf = append(p.buf, id...)
	p.buf = binary.AppendUvarint(p.buf, uint64(len(st)))
	p.buf = append(p.buf, st...)
	p.entries = append(p.entries, snapEntry{id: id, off: off, end: len(p.buf)})
}

func (p *shardSnapshot) writeTo(w io.Writer) error {
	slices.SortFunc(p.entries, func(a, b snapEntry) int {
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	version := byte(shardVersionNoOwn)
	if p.own != nil {
		version = shardVersion
	}
	head := append([]byte(shardMagic), version)
	head = binary.AppendVarint(head, p.now)
	head = binary.AppendUvarint(head, uint64(len(p.entries)))
	if _, err := bw.Write(head); err != nil {
		return err
	}
	for _, e := range p.entries {
		if _, err := bw.Write(p.buf[e.off:e.end]); err != nil {
			return err
		}
	}
	if p.own != nil {
		if _, err := bw.Write(append(binary.AppendUvarint(nil, uint64(len(p.own))), p.own...)); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// Restore implements raft.FSM: it decodes the snapshot into a fresh table
// and swaps it in only once the whole snapshot has been read and checked.
func (s *Shard) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	tab, now, own, err := decodeShardSnapshot(data)
	if err != nil && newerFormat(err) && !errors.Is(err, ErrSnapshotVersion) {
		return fmt.Errorf("%w: %w", ErrSnapshotVersion, err) // a key state's
	}
	if err != nil {
		return err
	}
	if own != nil {
		tab.countSlots(own)
	}
	s.mu.Lock()
	s.tab, s.now, s.own = tab, now, own
	s.mu.Unlock()
	return nil
}

func decodeShardSnapshot(data []byte) (*table, int64, *ownership, error) {
	if len(data) < len(shardMagic)+1+4 || string(data[:len(shardMagic)]) != shardMagic {
		return nil, 0, nil, fmt.Errorf("%w: not a shard snapshot", ErrCorrupt)
	}
	// The checksum first: a damaged version byte is damage, not a newer
	// release's snapshot (which stops the node, inside an entry).
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, 0, nil, fmt.Errorf("%w: shard snapshot checksum mismatch", ErrCorrupt)
	}
	version := data[len(shardMagic)]
	if version > shardVersion {
		return nil, 0, nil, fmt.Errorf("%w: %w: shard snapshot version %d, this binary reads up to %d", ErrSnapshotVersion, errNewer, version, shardVersion)
	}
	if version != shardVersion && version != shardVersionNoOwn {
		return nil, 0, nil, fmt.Errorf("%w: shard snapshot version %d", ErrSnapshotVersion, version)
	}
	r := bytes.NewReader(body[len(shardMagic)+1:])
	now, err := binary.ReadVarint(r)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%w: shard snapshot header", ErrCorrupt)
	}
	count, err := binary.ReadUvarint(r)
	if err != nil || count > uint64(len(body)) {
		return nil, 0, nil, fmt.Errorf("%w: shard snapshot header", ErrCorrupt)
	}
	tab := newTable()
	rest := body[len(body)-r.Len():]
	for i := uint64(0); i < count; i++ {
		n, err := decodeSnapEntry(tab, rest)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("shard snapshot entry %d: %w", i, err)
		}
		rest = rest[n:]
	}
	var own *ownership
	if version == shardVersion {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n != uint64(len(rest)-k) {
			return nil, 0, nil, fmt.Errorf("%w: shard snapshot ownership record", ErrCorrupt)
		}
		var err error
		if own, err = readOwnership(rest[k:]); err != nil {
			return nil, 0, nil, err
		}
		rest = nil
	}
	if len(rest) != 0 {
		return nil, 0, nil, fmt.Errorf("%w: %d trailing bytes in shard snapshot", ErrCorrupt, len(rest))
	}
	return tab, now, own, nil
}

// decodeSnapEntry adds one snapshot entry to tab and returns its length.
func decodeSnapEntry(tab *table, b []byte) (int, error) {
	idLen, n := binary.Uvarint(b)
	if n <= 0 || idLen > uint64(len(b)-n) {
		return 0, fmt.Errorf("%w: identity", ErrCorrupt)
	}
	off := n
	id := b[off : off+int(idLen)]
	off += int(idLen)
	l, ok := shapeOf(string(id))
	if !ok {
		return 0, fmt.Errorf("%w: state identity", ErrCorrupt)
	}
	stLen, n := binary.Uvarint(b[off:])
	if n <= 0 || stLen > uint64(len(b)-off-n) {
		return 0, fmt.Errorf("%w: state", ErrCorrupt)
	}
	off += n
	st, used, err := l.DecodeState(b[off : off+int(stLen)])
	if err != nil {
		return 0, err
	}
	if used != int(stLen) {
		return 0, fmt.Errorf("%w: state length", ErrCorrupt)
	}
	off += int(stLen)
	if _, dup := tab.lookup(id); dup {
		return 0, fmt.Errorf("%w: duplicate identity", ErrCorrupt)
	}
	tab.insert(id, st)
	return off, nil
}
