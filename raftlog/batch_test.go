package raftlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/hashicorp/raft"
)

// topRecords lists the types of the records of its own in a segment's
// bytes (a batch counts once), up to the first that does not parse.
func topRecords(data []byte) []byte {
	var types []byte
	for off := fileBody(data); off < len(data); {
		p, n, err := parseRecord(data[off:], fileSalt(data))
		if err != nil {
			break
		}
		types = append(types, p[0])
		off += n
	}
	return types
}

// Writers that queue behind a flush go out together as one batch record,
// and every one of their entries replays where it was read before.
func TestGroupCommitWritesOneBatch(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		c := &countingOps{}
		s, err := openWith(dir, Options{}, c.ops())
		if err != nil {
			t.Fatal(err)
		}
		hold := make(chan chan struct{})
		c.hold.Store(&hold)
		var wg sync.WaitGroup
		store := func(g int) {
			defer wg.Done()
			name := fmt.Sprintf("shard-%d", g)
			if err := s.Group(name).StoreLogs(entries(name, 1, 3, 1)); err != nil {
				t.Error(err)
			}
		}
		wg.Add(1)
		go store(0)
		release := <-hold // the first flush is in progress
		for g := 1; g < 8; g++ {
			wg.Add(1)
			go store(g)
		}
		synctest.Wait()
		c.hold.Store(nil)
		close(release)
		wg.Wait()
		if st := s.Stats(); st.Writes != 2 || st.Records != 8 {
			t.Fatalf("stats = %+v, want 8 records in 2 writes", st)
		}
		s.Close()
	})
	data, err := os.ReadFile(filepath.Join(dir, segName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := topRecords(data), []byte{recCheckpoint, recAppend, recBatch}; string(got) != string(want) {
		t.Fatalf("records of their own %v, want %v (checkpoint, the first writer, one batch of 7)", got, want)
	}
	s := openT(t, dir, Options{})
	defer s.Close()
	for g := range 8 {
		name := fmt.Sprintf("shard-%d", g)
		m := newModel()
		m.store(entries(name, 1, 3, 1))
		checkGroup(t, s.Group(name), m)
	}
}

// A power cut during a group-commit write can leave its pages on disk in
// any order. Whichever page of the batch is lost, the batch is damage
// with nothing whole after it: Open cuts it, and keeps what was written
// before.
func TestTornBatchIsCut(t *testing.T) {
	for _, lost := range []string{"first page", "last page"} {
		t.Run(lost, func(t *testing.T) {
			dir, path, data := storedThree(t)
			end := len(data)
			big := pageSpanning("a", 4)
			r1, _ := encodeEntries(recAppend, "a", []*raft.Log{big})
			r2, _ := encodeEntries(recAppend, "b", entries("b", 1, 2, 1))
			data = appendBatch(data, []*op{{rec: r1}, {rec: r2}}, fileSalt(data))
			from, to := end, (end/4096+1)*4096 // the page with the batch's start
			if lost == "last page" {
				from, to = (len(data)-1)/4096*4096, len(data) // r2 and the batch's end
			}
			clear(data[from:to])
			s2 := reopenCut(t, dir, path, data)
			checkGroup(t, s2.Group("b"), newModel())
		})
	}
}

// The records inside a batch are not whole records of their own: the scan
// that tells a torn write from damage mid-log does not find them.
func TestRecordsInsideABatchAreNotFoundAlone(t *testing.T) {
	r1, _ := encodeEntries(recAppend, "a", entries("a", 1, 2, 1))
	r2, _ := encodeEntries(recAppend, "b", entries("b", 1, 2, 1))
	batch := appendBatch(nil, []*op{{rec: r1}, {rec: r2}}, 0)
	if recordAfter(batch, 0) {
		t.Error("a scan of a batch whose header is lost finds a whole record")
	}
	if !recordAfter(append(append([]byte{0}, r1...), r2...), 0) {
		t.Error("the same records side by side are not found: the scan finds nothing")
	}
	var got []string
	if err := eachInBatch(batch[recHeaderSize:], func(r record, off int) error {
		got = append(got, fmt.Sprintf("%s@%d", r.group, off))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("[a@%d b@%d]", batchPrefix, batchPrefix+len(r1)); fmt.Sprint(got) != want {
		t.Errorf("records in the batch %v, want %s", got, want)
	}
}
