package raftlog

import (
	"encoding/binary"
	"fmt"
)

// Batches. The records of one group-commit write go out as one record, a
// batch, so that a write is either whole on disk or damaged with nothing
// whole after it. A power cut can leave a write's pages on disk in any
// order: had its records gone out side by side, a lost first page and a
// later record that survived whole would look like damage in the middle
// of the log, which replay must refuse; a batch torn that way is damage
// with nothing whole after it, which replay cuts as torn.
//
// Inside a batch each record keeps its own header, so every entry lies
// where it would had its record been written alone, but its header
// checksum is XORed with innerMark: a scan for whole records (torn,
// recordAfter) never takes a record inside a batch for one of its own.

// innerMark marks the header checksum of a record inside a batch.
const innerMark = 0xFFFFFFFF

// batchPrefix is where a batch's first record starts: its header and
// type byte.
const batchPrefix = recHeaderSize + 1

// appendBatch appends to dst a batch holding the records of ops, in order,
// for a segment of salt. The record of ops[i] then starts at batchPrefix
// plus the lengths of the records before it.
func appendBatch(dst []byte, ops []*op, salt uint32) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recHeaderSize)...)
	dst = append(dst, recBatch)
	for _, o := range ops {
		if len(o.rec) == 0 {
			continue // a barrier (tests)
		}
		at := len(dst)
		dst = append(dst, o.rec...)
		binary.LittleEndian.PutUint32(dst[at+8:], binary.LittleEndian.Uint32(dst[at+8:])^innerMark)
	}
	p := dst[start+recHeaderSize:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(dst[start+4:], checksum(p))
	binary.LittleEndian.PutUint32(dst[start+8:], checksum(dst[start:start+8])^salt)
	return dst
}

// eachInBatch calls fn with every record of a batch whose payload (its
// type byte on) is p, decoded, and its offset from the batch's start. The
// batch's checksum held, so a record that does not parse is damage
// written by a bug, not a torn write.
func eachInBatch(p []byte, fn func(r record, off int) error) error {
	if len(p) < 2 {
		return fmt.Errorf("empty batch")
	}
	off, rest := batchPrefix, p[1:]
	for len(rest) > 0 {
		inner, n, err := parseFramed(rest, innerMark)
		if err != nil {
			return fmt.Errorf("record at %d of a batch: %w", off, err)
		}
		r, err := decodeRecord(inner)
		if err != nil {
			return fmt.Errorf("record at %d of a batch: %w", off, err)
		}
		if err := fn(r, off); err != nil {
			return err
		}
		off, rest = off+n, rest[n:]
	}
	return nil
}
