package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/backup"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// snapshotAdmin sends backup on a save and keeps what a restore sends.
type snapshotAdmin struct {
	pb.UnimplementedAdminServer
	backup []byte
	mu     sync.Mutex
	saves  int
	got    []byte // the last restore's bytes
	// left is how long the last call's deadline left it when it came.
	left time.Duration
}

// noteDeadline keeps how long ctx's deadline leaves.
func (a *snapshotAdmin) noteDeadline(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.left = 0
	if d, ok := ctx.Deadline(); ok {
		a.left = time.Until(d)
	}
}

func (a *snapshotAdmin) SaveSnapshot(_ *pb.SaveSnapshotRequest, stream pb.Admin_SaveSnapshotServer) error {
	a.noteDeadline(stream.Context())
	a.mu.Lock()
	a.saves++
	a.mu.Unlock()
	for data := a.backup; len(data) > 0; {
		n := min(len(data), 7) // several chunks
		if err := stream.Send(&pb.SnapshotChunk{Data: data[:n]}); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

func (a *snapshotAdmin) RestoreSnapshot(stream pb.Admin_RestoreSnapshotServer) error {
	a.noteDeadline(stream.Context())
	var data []byte
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		data = append(data, chunk.Data...)
	}
	a.mu.Lock()
	a.got = data
	a.mu.Unlock()
	return stream.SendAndClose(&pb.RestoreSnapshotResponse{Policies: 2, Keys: 8})
}

// sampleBackup is a whole backup of two policies and one group's states
// (the server side is faked: their bytes are not read here).
func sampleBackup(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := backup.NewWriter(&buf)
	if err := w.Policies([]*pb.Policy{{Name: "a"}, {Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.States([]byte("states")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// runCtl runs floodgatectl against a with stdin in; it returns stdout and
// stderr.
func runCtl(t *testing.T, a *snapshotAdmin, in io.Reader, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out)
	root.SetIn(in)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"--addr", serveAdmin(t, a)}, args...))
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// save to an existing directory fails at once, before the cluster is
// asked for a backup, and says why.
func TestSnapshotSaveToADirectory(t *testing.T) {
	a := &snapshotAdmin{backup: sampleBackup(t)}
	dir := filepath.Join(t.TempDir(), "dir.fgbk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCtl(t, a, nil, "snapshot", "save", dir)
	if err == nil || !strings.Contains(err.Error(), dir+": is a directory") {
		t.Fatalf("save to a directory: %v", err)
	}
	if a.saves != 0 {
		t.Fatal("the cluster was asked for a backup that could not be written")
	}
	if _, err := os.Stat(dir + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("a temporary file was left: %v", err)
	}
}

// save - writes the backup to stdout and the summary to stderr; restore -
// reads stdin. No file named "-" is written.
func TestSnapshotStdio(t *testing.T) {
	t.Chdir(t.TempDir())
	data := sampleBackup(t)
	a := &snapshotAdmin{backup: data}
	stdout, stderr, err := runCtl(t, a, nil, "snapshot", "save", "-")
	if err != nil || stdout != string(data) || !strings.Contains(stderr, "saved stdout: ") {
		t.Fatalf("save -: %v, stdout %q, stderr %q", err, stdout, stderr)
	}
	if _, err := os.Stat("-"); !os.IsNotExist(err) {
		t.Fatalf("save - wrote a file named -: %v", err)
	}
	stdout, stderr, err = runCtl(t, a, nil, "snapshot", "save", "-", "--json")
	var saved struct{ Bytes, Policies, Groups int }
	if err != nil || stdout != string(data) || json.Unmarshal([]byte(stderr), &saved) != nil || saved.Bytes != len(data) || saved.Policies != 2 {
		t.Fatalf("save - --json: %v, stderr %q", err, stderr)
	}
	if stdout, _, err = runCtl(t, a, bytes.NewReader(data), "snapshot", "restore", "-"); err != nil || !bytes.Equal(a.got, data) {
		t.Fatalf("restore -: %v %q; the server got %d bytes of %d", err, stdout, len(a.got), len(data))
	}
	// What stdin holds is checked as a file is.
	a.got = nil
	if _, _, err = runCtl(t, a, bytes.NewReader(append(bytes.Clone(data), 1)), "snapshot", "restore", "-"); err == nil ||
		!strings.Contains(err.Error(), "stdin: ") || !strings.Contains(err.Error(), "trailing bytes") || a.got != nil {
		t.Fatalf("restore - of a damaged backup: %v", err)
	}
}

// restore --json prints both counts as JSON numbers.
func TestSnapshotRestoreJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "b.fgbk")
	if err := os.WriteFile(file, sampleBackup(t), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runCtl(t, &snapshotAdmin{}, nil, "snapshot", "restore", file, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%q: %v", stdout, err)
	}
	if got["keys"] != float64(8) || got["policies"] != float64(2) {
		t.Fatalf("restore --json printed %q: want numbers", stdout)
	}
}

// A file over the size a restore takes is refused by its size: it is not
// read (before, 3 GB were read into memory first), and nothing is sent.
func TestSnapshotRestoreHugeFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "huge.fgbk")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3 << 30); err != nil { // sparse: no disk used
		t.Skipf("no sparse file here: %v", err)
	}
	f.Close()
	a := &snapshotAdmin{}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err = runCtl(t, a, nil, "snapshot", "restore", file)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "over 1073741824") || !strings.Contains(err.Error(), "3221225472 bytes") {
		t.Fatalf("a 3 GB file: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("refusing a 3 GB file allocated %d MB", alloc>>20)
	}
	if a.got != nil {
		t.Fatal("a refused file was sent")
	}
}

// otherBackup is a whole backup unlike sampleBackup's.
func otherBackup(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := backup.NewWriter(&buf)
	if err := w.Policies([]*pb.Policy{{Name: "other"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.States(bytes.Repeat([]byte("more states "), 20)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Two saves to one file at once (a cron job that overran) each write
// their own temporary file: the backup in place is always one whole
// backup. They shared dest.tmp: the later save's writes went into the
// backup the earlier one had renamed into place and reported saved, and
// its own commit failed. A file of the user's named dest.tmp is left
// alone.
func TestSnapshotSavesToOneFileAtOnce(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "b.fgbk")
	if err := os.WriteFile(dest+".tmp", []byte("the user's"), 0o600); err != nil {
		t.Fatal(err)
	}
	first, second := otherBackup(t), sampleBackup(t)
	slow, err := openSaveFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.discard()
	if err := slow.write(first[:7]); err != nil {
		t.Fatal(err)
	}
	quick, err := openSaveFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer quick.discard()
	if err := quick.write(second); err != nil {
		t.Fatal(err)
	}
	if _, err := quick.commit(io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := slow.write(first[7:]); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, second) {
		t.Fatal("the backup saved and renamed into place was written to by another save")
	}
	if _, err := slow.commit(io.Discard); err != nil {
		t.Fatalf("the second save to commit: %v", err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, first) {
		t.Fatal("the backup in place is not the last one saved")
	}
	if got, err := os.ReadFile(dest + ".tmp"); err != nil || string(got) != "the user's" {
		t.Fatalf("the user's file b.fgbk.tmp: %q, %v", got, err)
	}
	if left, _ := filepath.Glob(dest + ".*.tmp"); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// A save into a directory it cannot create a file in (here: one that
// does not exist; a read-only one alike) fails before the cluster is
// asked, naming the destination, not only the temporary file.
func TestSnapshotSaveNamesTheDestination(t *testing.T) {
	a := &snapshotAdmin{backup: sampleBackup(t)}
	dest := filepath.Join(t.TempDir(), "missing", "b.fgbk")
	_, _, err := runCtl(t, a, nil, "snapshot", "save", dest)
	if err == nil || !strings.HasPrefix(err.Error(), dest+": ") || !strings.Contains(err.Error(), "no such file or directory") || a.saves != 0 {
		t.Fatalf("save into a missing directory: %v (%d saves asked)", err, a.saves)
	}
}

// Save and restore wait up to 10 minutes unless --timeout says otherwise:
// a backup may be 1 GiB, and the 10 s default of other commands cut a
// restore of a few hundred MiB off half-way, with part of it written.
func TestSnapshotTimeout(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "b.fgbk")
	a := &snapshotAdmin{backup: sampleBackup(t)}
	for _, c := range []struct {
		args      []string
		least, at time.Duration
	}{
		{[]string{"snapshot", "save", file}, 9 * time.Minute, 10 * time.Minute},
		{[]string{"snapshot", "restore", file}, 9 * time.Minute, 10 * time.Minute},
		{[]string{"snapshot", "save", file, "--timeout", "3s"}, time.Second, 3 * time.Second},
		{[]string{"snapshot", "restore", file, "--timeout", "3s"}, time.Second, 3 * time.Second},
	} {
		if _, _, err := runCtl(t, a, nil, c.args...); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if a.left < c.least || a.left > c.at {
			t.Errorf("%v: the server had %s left, want about %s", c.args, a.left, c.at)
		}
	}
}
