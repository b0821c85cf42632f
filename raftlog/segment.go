package raftlog

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	segMagic      = "FGRLOG\x00" // then the format version, one byte
	segHeaderSize = 16
	segSuffix     = ".seg"
)

// Segment formats. Version 1: the sequence number as 8 bytes, records'
// header checksums as they are. Version 2: the sequence number as 4 bytes,
// then a random salt that every record of the segment XORs into its header
// checksum. Entry data is written as it is, and a client chooses its keys:
// a key could hold bytes that read as a whole record. Unsalted, such a key
// behind a torn write (its first page lost) made replay take the write for
// damage in the middle of the log; a client cannot know a segment's salt,
// so a record it forges no longer reads as whole. Version 3: version 2
// with a fence after the header, an unsalted record that no release
// appends (recFence). Releases before version 2 took the last segment of a
// format they did not know for one torn while being created, unless a
// whole (unsalted) record followed its header, and dropped it: a node
// downgraded onto a log of version 2 lost its newest entries, and a single
// node its whole cluster. The fence is that whole record, so they refuse
// the segment instead; releases of version 2 refuse version 3 as newer.
const (
	segV1 byte = 1
	segV2 byte = 2
	segV3 byte = 3
)

// fencePayload is the payload of a version 3 segment's fence.
const fencePayload = "\x08floodgate raftlog segment, format 3 or later"

// segBody is where a version 3 segment's records start: past its header
// and fence (segHeaderSize in versions 1 and 2).
const segBody = segHeaderSize + recHeaderSize + len(fencePayload)

// fence is a version 3 segment's fence record, as it is on disk.
var fence = frameFence()

func frameFence() []byte {
	b := make([]byte, recHeaderSize, recHeaderSize+len(fencePayload))
	b = append(b, fencePayload...)
	binary.LittleEndian.PutUint32(b[0:], uint32(len(fencePayload)))
	binary.LittleEndian.PutUint32(b[4:], checksum(b[recHeaderSize:]))
	binary.LittleEndian.PutUint32(b[8:], checksum(b[:8]))
	return b
}

// isFence reports whether a record's payload is a fence's.
func isFence(payload []byte) bool { return string(payload) == fencePayload }

// errNewerSegment is a segment header of a format this release does not
// know: written by a newer floodgate.
var errNewerSegment = errors.New("a segment format this release does not know (written by a newer floodgate?)")

// segment is one file of the log. Only the flusher writes it (and, before
// it starts, replay); readers use ReadAt, which needs no lock of its own.
type segment struct {
	seq  uint32
	salt uint32 // XORed into its records' header checksums (segV2)
	// fenced is set for a segment of segV3 (or later): releases before
	// salts refuse it rather than drop it (replay starts one at open).
	fenced bool
	path   string
	f      *os.File
	size   int64 // bytes of valid records written so far
	// allocated is how far the file is preallocated (zeros past size), so
	// most appends write inside the file: an fdatasync that need not
	// journal a new file size costs a third less CPU (ext4, measured).
	allocated int64
}

// fileOps is the seam through which the store writes and flushes files, so
// tests can count fsyncs, hold a flush in progress, or make one fail.
type fileOps struct {
	write func(f *os.File, p []byte, off int64) error
	sync  func(f *os.File) error
	// allocate extends f with n zero bytes at off, allocated on disk
	// (nil, or an error: the writes extend the file themselves).
	allocate func(f *os.File, off, n int64) error
}

func defaultFileOps() fileOps {
	return fileOps{
		write: func(f *os.File, p []byte, off int64) error {
			_, err := f.WriteAt(p, off)
			return err
		},
		sync:     syncFile,
		allocate: allocateFile,
	}
}

// preallocChunk is how far ahead of the last record a segment's file is
// allocated: a new file size is journaled once per chunk, not per flush.
const preallocChunk = 4 << 20

// reserve preallocates seg so that n more bytes fit inside the file. It
// is best effort: on a filesystem that cannot (or a full disk) the write
// extends the file as before and fails there if it must.
func (seg *segment) reserve(n int64, ops fileOps) {
	if ops.allocate == nil || seg.size+n <= seg.allocated {
		return
	}
	want := max(n, preallocChunk)
	if err := ops.allocate(seg.f, seg.size, want); err == nil {
		seg.allocated = seg.size + want
	}
}

// trim cuts seg's file to its records, dropping the preallocated zeros:
// only the last segment may end in zeros (replay reads them as the end
// of the log), so a segment is trimmed before a newer one is started.
func (seg *segment) trim() error {
	if seg.allocated <= seg.size {
		return nil
	}
	if err := seg.f.Truncate(seg.size); err != nil {
		return err
	}
	seg.allocated = seg.size
	return nil
}

func segName(seq uint32) string { return fmt.Sprintf("%08x%s", seq, segSuffix) }

// listSegments returns the sequence numbers of dir's segments, in order.
func listSegments(dir string) ([]uint32, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint32
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), segSuffix)
		if !ok || e.IsDir() {
			continue
		}
		v, err := strconv.ParseUint(name, 16, 32)
		if err != nil || segName(uint32(v)) != e.Name() {
			return nil, fmt.Errorf("%w: unexpected file %s in %s", ErrCorrupt, e.Name(), dir)
		}
		seqs = append(seqs, uint32(v))
	}
	slices.Sort(seqs)
	return seqs, nil
}

// segHeader returns the header and fence of segment seq whose records are
// salted with salt (segV3): segBody bytes.
func segHeader(seq, salt uint32) []byte {
	h := make([]byte, segHeaderSize, segBody)
	copy(h, segMagic)
	h[7] = segV3
	binary.LittleEndian.PutUint32(h[8:], seq)
	binary.LittleEndian.PutUint32(h[12:], salt)
	return append(h, fence...)
}

// checkSegHeader reads b's header as segment seq's: ok, the salt of its
// records (0 in a segV1 segment) and where they start; errNewerSegment
// for a format this release does not know; not ok for anything else (a
// version 3 header without its whole fence included).
func checkSegHeader(b []byte, seq uint32) (salt uint32, body int, ok bool, err error) {
	if len(b) < segHeaderSize || string(b[:7]) != segMagic {
		return 0, 0, false, nil
	}
	switch b[7] {
	case segV1:
		return 0, segHeaderSize, binary.LittleEndian.Uint64(b[8:]) == uint64(seq), nil
	case segV2:
		return binary.LittleEndian.Uint32(b[12:]), segHeaderSize, binary.LittleEndian.Uint32(b[8:]) == seq, nil
	case segV3:
		ok := binary.LittleEndian.Uint32(b[8:]) == seq && len(b) >= segBody && string(b[segHeaderSize:segBody]) == string(fence)
		return binary.LittleEndian.Uint32(b[12:]), segBody, ok, nil
	}
	return 0, 0, false, errNewerSegment
}

// newSalt draws a segment's salt: never 0 (a record's own checksum) nor
// innerMark (a record inside a batch), so neither is taken for the other.
func newSalt() uint32 {
	var b [4]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		if s := binary.LittleEndian.Uint32(b[:]); s != 0 && s != innerMark {
			return s
		}
	}
}

// saltRecord XORs salt into the header checksum of the record at the
// start of rec, as a segment of that salt holds it.
func saltRecord(rec []byte, salt uint32) {
	binary.LittleEndian.PutUint32(rec[8:], binary.LittleEndian.Uint32(rec[8:])^salt)
}

// createSegment makes segment seq holding its header and first, then
// flushes it and its directory entry, so a crash never leaves a newer
// segment whose start is lost.
func createSegment(dir string, seq uint32, first []byte, ops fileOps) (*segment, error) {
	path := filepath.Join(dir, segName(seq))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	salt := newSalt()
	buf := append(segHeader(seq, salt), first...)
	saltRecord(buf[segBody:], salt)
	if err := ops.write(f, buf, 0); err != nil {
		f.Close()
		return nil, err
	}
	if err := ops.sync(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &segment{seq: seq, salt: salt, fenced: true, path: path, f: f, size: int64(len(buf))}, nil
}

// SyncDir flushes dir's entries (new, renamed and removed files).
func SyncDir(dir string) error { return syncDir(dir) }

// syncDir flushes dir's entries (new and removed files).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// MkdirDurable creates dir and any missing parents, and syncs the parent
// of each directory it created: a power cut after the first acknowledged
// write must not lose the directory that holds it. The node creates its
// data dir and its groups' snapshot dirs with it, and the log its own.
func MkdirDurable(dir string) error { return mkdirDurable(dir, syncDir) }

// mkdirDurable is MkdirDurable with the sync of a directory given.
func mkdirDurable(dir string, syncDir func(string) error) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		_, err := os.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		// A parent this process may traverse but not read cannot be
		// opened to sync: nothing better can be done there.
		if err := syncDir(filepath.Dir(d)); err != nil && !errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("sync %s: %w", filepath.Dir(d), err)
		}
	}
	return nil
}
