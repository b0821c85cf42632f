package raftlog

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/floodgate/floodgate/metrics"
)

// maxKeptBuffer is the largest write buffer the flusher keeps between
// batches; a bigger one (a burst of large entries) is let go.
const maxKeptBuffer = 4 << 20

// Group commit. A caller of commit that finds nobody writing becomes the
// writer: it writes every record queued so far, its own among them, syncs
// once and answers them all, on its own goroutine (no wakeup of another
// and back, which on a virtual machine costs more than the write). Callers
// that come meanwhile queue and wait; if any did, or the log needs
// housekeeping (a full segment, segments to delete), the writer hands the
// rest to the flusher goroutine and returns. Records queued during a sync
// go out together in the next one, so under load each fsync serves every
// group that wrote meanwhile. Whoever writes holds s.flushing: only one
// goroutine at a time writes, rotates or collects.

// flushInline is the round a committing caller runs itself when nobody is
// writing.
func (s *Store) flushInline() {
	s.round(nil)
	s.qmu.Lock()
	if len(s.queue) == 0 && !s.maintenanceDue() {
		s.release()
		s.qmu.Unlock()
		return
	}
	s.qmu.Unlock()
	s.kick <- struct{}{} // the flusher takes over; flushing stays held
}

// flusher writes the rounds handed to it (kick), each followed by the
// housekeeping, until a round finds nothing queued; then the next caller
// writes.
func (s *Store) flusher() {
	defer close(s.done)
	buf := []byte{}
	for {
		select {
		case <-s.kick:
		case <-s.stop:
			return
		}
		for {
			s.maintainIfHealthy()
			if next := s.round(buf); next != nil {
				buf = next
				continue // the housekeeping after this write comes first
			}
			if s.beforeRelease != nil {
				s.beforeRelease()
			}
			// Checked under the lock that releases: a caller that queued
			// after the empty round saw flushing held and waits for a
			// writer.
			s.qmu.Lock()
			if len(s.queue) == 0 {
				s.release()
				s.qmu.Unlock()
				break
			}
			s.qmu.Unlock()
		}
	}
}

// round writes and syncs everything queued, answers it, and returns buf
// to reuse, or nil when there was nothing to write.
func (s *Store) round(buf []byte) []byte {
	s.qmu.Lock()
	batch := s.queue
	s.queue = nil
	s.qmu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	buf, err := s.writeBatch(batch, buf[:0])
	for _, o := range batch {
		o.done <- err
	}
	if cap(buf) > maxKeptBuffer || buf == nil {
		buf = []byte{}
	}
	return buf
}

// maintainIfHealthy does the housekeeping unless a write failed.
func (s *Store) maintainIfHealthy() {
	s.qmu.Lock()
	failed := s.failed
	s.qmu.Unlock()
	if failed == nil {
		s.maintain()
	}
}

// release lets the next committing caller write; the caller holds qmu.
func (s *Store) release() {
	s.flushing = false
	s.idle.Broadcast()
}

// maintenanceDue reports whether maintain has work: a full segment, a
// segment no group needs, too many segments. The writer holds flushing.
func (s *Store) maintenanceDue() bool {
	if s.failed != nil {
		return false
	}
	if s.active().size >= s.opts.SegmentSize || len(s.segs) > s.opts.MaxSegments {
		return true
	}
	if len(s.segs) == 1 {
		return false
	}
	oldest := s.segs[0].seq
	for _, g := range s.groups {
		if seq := g.firstSeg(); seq != 0 && seq <= oldest {
			return false
		}
	}
	return true
}

// writeBatch appends the batch's records to the active segment, syncs,
// and applies them to the index, which then shows only durable entries.
func (s *Store) writeBatch(batch []*op, buf []byte) ([]byte, error) {
	s.qmu.Lock()
	failed := s.failed
	s.qmu.Unlock()
	if failed != nil {
		return buf, failed
	}
	size, recs := 0, 0
	for _, o := range batch {
		size += len(o.rec)
		if len(o.rec) > 0 {
			recs++
		}
	}
	if size == 0 {
		return buf, nil // only barriers (tests): nothing to write
	}
	// Several records go out as one batch (batch.go), unless that would
	// pass a record's limit: then side by side, as before batches.
	batched := recs > 1 && size+1 <= int(payloadLimit)
	if batched {
		size += batchPrefix
	}
	if seg := s.active(); seg.size+int64(size) > math.MaxUint32 {
		// Offsets are 32 bits: a huge batch starts a segment of its own.
		if err := s.rotate(); err != nil {
			return buf, s.fail(err)
		}
	}
	seg := s.active()
	out := batch[0].rec
	switch {
	case batched:
		buf = appendBatch(buf, batch, seg.salt)
		out = buf
	default:
		// Records of their own carry the segment's salt. A queued op's
		// record is the flusher's: salted in place, no copy.
		for _, o := range batch {
			if len(o.rec) > 0 {
				saltRecord(o.rec, seg.salt)
			}
		}
		if len(batch) > 1 {
			for _, o := range batch {
				buf = append(buf, o.rec...)
			}
			out = buf
		}
	}
	base := seg.size
	seg.reserve(int64(len(out)), s.ops)
	err := s.ops.write(seg.f, out, base)
	if err == nil && !s.opts.NoSync {
		s.nSyncs.Add(1)
		start := time.Now()
		err = s.ops.sync(seg.f)
		metrics.FsyncSeconds.Observe(time.Since(start).Seconds())
		metrics.StoresPerFlush.Observe(float64(len(batch)))
	}
	if err != nil {
		return buf, s.fail(fmt.Errorf("write %s: %w", seg.path, err))
	}
	seg.size += int64(len(out))
	s.nWrites.Add(1)
	s.nRecords.Add(uint64(len(batch)))
	s.nBytes.Add(uint64(len(out)))
	s.mu.Lock()
	defer s.mu.Unlock()
	off := base
	if batched {
		off += batchPrefix
	}
	for _, o := range batch {
		if err := applyRecord(s.groups, o.r, seg.seq, uint32(off)); err != nil {
			// Checked before queueing, so this is a bug: memory no
			// longer matches what replay would build.
			return buf, s.fail(fmt.Errorf("apply record of %s: %w", o.r.group, err))
		}
		off += int64(len(o.rec))
	}
	return buf, nil
}

// maintain rotates a full segment, rewrites the groups that keep too many
// segments alive, and deletes the segments no group needs.
func (s *Store) maintain() {
	if s.active().size >= s.opts.SegmentSize {
		if err := s.rotate(); err != nil {
			s.fail(err)
			return
		}
	}
	if err := s.collect(); err != nil {
		s.fail(err)
		return
	}
	if len(s.segs) > s.opts.MaxSegments {
		if err := s.rewritePinned(); err != nil {
			s.fail(err)
			return
		}
		if err := s.collect(); err != nil {
			s.fail(err)
		}
	}
}

// rotate starts a new segment. The old one is synced first (even with
// NoSync: it is rare) so that a newer segment never exists while an older
// one is incomplete, and the new one starts with a checkpoint of every
// stable key, so older segments never hold one that is still needed.
func (s *Store) rotate() error {
	old := s.active()
	if err := old.trim(); err != nil {
		return fmt.Errorf("trim %s: %w", old.path, err)
	}
	if err := s.ops.sync(old.f); err != nil {
		return fmt.Errorf("sync %s: %w", old.path, err)
	}
	seg, err := createSegment(s.dir, old.seq+1, encodeCheckpoint(s.stableKeys()), s.ops)
	if err != nil {
		return fmt.Errorf("start segment %d: %w", old.seq+1, err)
	}
	s.mu.Lock()
	s.segs = append(s.segs, seg)
	s.mu.Unlock()
	return nil
}

// stableKeys lists every group's stable keys in a fixed order. Only the
// flusher calls it (and replay), so groups needs no lock.
func (s *Store) stableKeys() []groupKV {
	var kvs []groupKV
	for name, g := range s.groups {
		for k, v := range g.kv {
			kvs = append(kvs, groupKV{group: name, key: []byte(k), val: v})
		}
	}
	slices.SortFunc(kvs, func(a, b groupKV) int {
		if a.group != b.group {
			if a.group < b.group {
				return -1
			}
			return 1
		}
		return slices.Compare(a.key, b.key)
	})
	return kvs
}
