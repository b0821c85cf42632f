package raftnet

import (
	"testing"

	"github.com/hashicorp/raft"
)

// A frame carries about sendBatch bytes of entries at most, one entry at
// least: raft hands a follower catching up 64 entries whatever their
// size, and a frame of slot moves' imports held every other group's
// heartbeats on the link behind it for as long as it took to write.
func TestFramesCarryABoundedBatch(t *testing.T) {
	entries := func(n, size int) []*raft.Log {
		out := make([]*raft.Log, n)
		for i := range out {
			out[i] = &raft.Log{Index: uint64(i + 1), Data: make([]byte, size)}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		n, size int
		want    int
	}{
		{"small entries all go", 64, 1 << 10, 64},
		{"4 MiB imports, one a frame", 64, 4 << 20, 1},
		{"3 MiB entries, two a frame", 10, 3 << 20, 2},
		{"an entry over the batch goes alone", 3, 40 << 20, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &raft.AppendEntriesRequest{Entries: entries(tc.n, tc.size)}
			fitEntries(r)
			if len(r.Entries) != tc.want {
				t.Errorf("%d entries of %d bytes: a frame carries %d, want %d", tc.n, tc.size, len(r.Entries), tc.want)
			}
		})
	}
}
