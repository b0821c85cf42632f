package raftlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// replay rebuilds every group from the segments, cuts a torn tail off the
// last one, and leaves the last one open for appending.
func (s *Store) replay() error {
	seqs, err := listSegments(s.dir)
	if err != nil {
		return err
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			return fmt.Errorf("%w: segment %s is missing from %s", ErrCorrupt, segName(seqs[i-1]+1), s.dir)
		}
	}
	for i, seq := range seqs {
		seg, err := s.replaySegment(seq, i == len(seqs)-1)
		if err != nil {
			return err
		}
		if seg != nil {
			s.segs = append(s.segs, seg)
		}
	}
	if len(s.segs) > 0 {
		if !s.active().fenced {
			// A log of an older format goes on in a new segment, fenced:
			// a release before salts would take its last segment, of a
			// format it cannot read, for one torn while being created and
			// delete it, entries and all (segment.go).
			return s.rotate()
		}
		return nil
	}
	next := uint32(1)
	if len(seqs) > 0 {
		next = seqs[0] // the only one, removed as torn at its creation
	}
	seg, err := createSegment(s.dir, next, encodeCheckpoint(nil), s.ops)
	if err != nil {
		return err
	}
	s.segs = append(s.segs, seg)
	return nil
}

// replaySegment applies one segment's records. In the last segment a torn
// tail is cut off; a last segment whose first record (its checkpoint) never
// made it to disk is removed, being a crash in the middle of rotation (nil,
// nil). Any other damage is ErrCorrupt.
func (s *Store) replaySegment(seq uint32, last bool) (*segment, error) {
	path := filepath.Join(s.dir, segName(seq))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	corrupt := func(off int, why any) error {
		return fmt.Errorf("%w: %s at offset %d: %v; the node's Raft log cannot be trusted: "+
			"rebuild the node from its peers", ErrCorrupt, path, off, why)
	}
	salt, off, ok, herr := checkSegHeader(data, seq)
	nrec := 0
	if herr != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, herr)
	}
	if !ok {
		// Torn while being created: its write may have reached the disk
		// in part, in any order, but nothing whole (no record) survives.
		// Its salt, if its bytes made it, or none (segV1).
		if !last || (len(data) >= segHeaderSize && !allZero(data) &&
			(recordAfter(data, 0) || recordAfter(data, binary.LittleEndian.Uint32(data[12:])))) {
			return nil, corrupt(0, "not a segment header")
		}
		off = len(data) // torn while being created
	}
	for off < len(data) {
		p, n, perr := parseRecord(data[off:], salt)
		if perr != nil {
			if !last || !torn(data[off:], perr, n, salt) {
				return nil, corrupt(off, perr)
			}
			break
		}
		if p[0] == recBatch {
			if nrec == 0 {
				return nil, corrupt(off, "segment does not start with a checkpoint")
			}
			err := eachInBatch(p, func(r record, at int) error {
				nrec++
				return applyRecord(s.groups, r, seq, uint32(off+at))
			})
			if err != nil {
				return nil, corrupt(off, err)
			}
			off += n
			continue
		}
		r, err := decodeRecord(p)
		if err != nil {
			return nil, corrupt(off, err)
		}
		if nrec == 0 && r.typ != recCheckpoint {
			return nil, corrupt(off, "segment does not start with a checkpoint")
		}
		if err := applyRecord(s.groups, r, seq, uint32(off)); err != nil {
			return nil, corrupt(off, err)
		}
		off += n
		nrec++
	}
	if nrec == 0 {
		if !last {
			return nil, corrupt(off, "segment holds no record")
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
		return nil, syncDir(s.dir)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if off < len(data) {
		// Cut the torn tail, durably, so appends follow the last whole
		// record and a later replay does not meet the torn bytes mid-log.
		err := f.Truncate(int64(off))
		if err == nil {
			err = s.ops.sync(f)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cut torn tail of %s: %w", path, err)
		}
	}
	return &segment{seq: seq, salt: salt, fenced: data[7] >= segV3, path: path, f: f, size: int64(off)}, nil
}

// torn reports whether damage at the start of rest, in a segment of salt,
// can only be a write cut short by a crash: nothing whole could come after
// it. A record whose header holds but whose payload does not is torn only
// if it is the last, followed by no byte but the zeros a preallocated file
// reads as.
func torn(rest []byte, err error, n int, salt uint32) bool {
	switch {
	case allZero(rest):
		return true
	case err == errShortHeader, err == errPastEnd:
		return true
	case err == errPayloadCRC && allZero(rest[n:]):
		// The last record, followed by nothing or by the zeros of a
		// preallocated file.
		return true
	case (err == errHeaderCRC || err == errTooLarge) && allZero(rest[min(recHeaderSize, len(rest)):]):
		// A header torn in a preallocated file: nothing after it written.
		return true
	}
	// Nothing whole follows: the last write, whose pages reached the disk
	// out of order (writeback has none), lost one in the middle.
	return !recordAfter(rest, salt)
}

func allZero(b []byte) bool { return len(bytes.Trim(b, "\x00")) == 0 }

// recordAfter reports whether a whole record of a segment of salt starts
// anywhere in rest past its first byte. A fence is not one: it is written
// with the header, before any record.
func recordAfter(rest []byte, salt uint32) bool {
	for i := 1; i+recHeaderSize <= len(rest); i++ {
		if p, _, err := parseRecord(rest[i:], salt); err == nil && !isFence(p) {
			return true
		}
	}
	return false
}
