// Package raftlog is a node-wide Raft log: one append-only log shared by
// every Raft group of a node, giving each group a raft.LogStore and a
// raft.StableStore.
//
// Why: a raft-boltdb file per group costs a copy-on-write bolt transaction
// per append and an fsync per group; with dozens of groups per node the
// disk flush, not the work, caps throughput. Here every group's appends go
// to the same segment files, and concurrent writers share one write and one
// fsync (group commit): a writer that arrives while a flush runs joins the
// next one.
//
// # Records
//
// The log is a sequence of segment files (NNNNNNNN.seg, rotated at
// Options.SegmentSize). A segment starts with a 16-byte header (magic and
// format byte, its sequence number, a random salt) and a fence (an
// unsalted record no release appends, so that releases before salts
// refuse the segment rather than drop it as torn; segment.go), followed by
// records. A record is
//
//	u32 payload length | u32 crc32c(payload) | u32 crc32c(the first 8 bytes) ^ salt | payload
//
// (little-endian). Entry data is stored as it is and a client chooses its
// keys, so a key may hold bytes that read as a whole record; the salt,
// which no client knows, keeps such a record from reading as whole in the
// segment, where it would make a torn write look like damage in the middle
// of the log (Recovery). Segments of format 1, written before salts, have
// none (0). The last segment's file is preallocated a few MiB past
// its last record (zeros), so that an append writes inside the file and
// its fdatasync need not journal a new file size: about a third less CPU
// per flush on ext4. A clean close, and the start of a newer segment, cut
// the zeros off. The header has its own checksum so that a damaged length
// is never mistaken for a torn write. The payload's first byte is its type:
// append (one StoreLogs call: group, first index, entries), delete
// (DeleteRange), set (a stable key), checkpoint (every group's stable keys,
// the first record of every segment), drop (a group deleted) and reset (a
// group's whole log rewritten, see GC below). One StoreLogs call is one
// record, so it is durable all or nothing. Each entry inside an append
// carries its own crc32c, because reads go back to the file. The records
// of one group-commit write go out inside one batch record (batch.go), so
// that a write torn by a power cut, whose pages reached the disk in any
// order, is damage with nothing whole after it: replay cuts it as torn.
//
// # Memory
//
// Each group keeps in memory only where its entries are (12 bytes an
// entry: segment, offset, length); GetLog reads the entry back from the
// segment (the page cache, normally) and checks its checksum. Entries
// are kept on disk rather than in memory because shard entries carry whole
// batches and a group keeps thousands of them (raft's TrailingLogs plus up
// to SnapshotThreshold): with 64 groups that would be hundreds of megabytes
// of copies of what the log cache in front of it keeps hot. Stable keys are kept
// in memory.
//
// # Recovery
//
// Open replays every segment in order. A damaged record in the last
// segment is a torn write when nothing valid can follow it (the file ends
// inside the record, or only zeros follow the record, or its header):
// the tail is cut there, which loses only writes that were never
// acknowledged. Any other damage, anywhere else, is refused with
// ErrCorrupt naming the file and offset: the log cannot be trusted and the
// node must be rebuilt from its peers.
//
// # GC
//
// Segments are deleted oldest first, only while no group has a live entry
// in them, so every delete or drop record that follows a retained entry is
// retained too and replay reproduces each group exactly. Stable keys never
// hold a segment: each segment starts with a checkpoint of all of them. A
// group that writes rarely (and so never snapshots) would pin the oldest
// segment forever; when more than Options.MaxSegments segments are kept,
// the groups pinning the oldest one are rewritten to the active segment as
// one reset record each, and the old segment goes.
//
// # Durability
//
// StoreLogs, DeleteRange, Set and Drop return once their record is written
// and, unless Options.NoSync, fsync'd (fdatasync on Linux). Records are
// appended in order and a new segment is fsync'd, with its directory,
// before anything is written to it, so what a crash keeps is always a
// prefix of what was written: an acknowledged write survives a process
// crash and a power cut. A failed write or fsync fails the store for good
// (the page cache can no longer be trusted): every later call returns the
// error and the node must restart, replaying what reached the disk.
package raftlog
