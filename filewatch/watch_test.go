package filewatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A change of a file's size or modification time reloads it at the next
// look, and only then; a failing reload is tried at every look but
// reported once per change of the files.
func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f")
		write := func(s string, mod time.Time) {
			if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, mod, mod); err != nil {
				t.Fatal(err)
			}
		}
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		write("a", base)
		var mu sync.Mutex // the watch's goroutine against the test's
		seen := Of(path)
		var reloads, reported int
		var fail error
		reload := func() error {
			mu.Lock()
			defer mu.Unlock()
			reloads++
			if fail != nil {
				return fail
			}
			seen = Of(path)
			return nil
		}
		lookSeen := func() Stamp { mu.Lock(); defer mu.Unlock(); return seen }
		report := func(error) { mu.Lock(); reported++; mu.Unlock() }
		counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return reloads, reported }
		setFail := func(err error) { mu.Lock(); fail = err; mu.Unlock() }
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go Watch(ctx, 10*time.Second, []string{path, ""}, lookSeen, reload, report)

		time.Sleep(25 * time.Second)
		synctest.Wait()
		if r, _ := counts(); r != 0 {
			t.Fatalf("%d reloads of an unchanged file", r)
		}
		write("bb", base.Add(time.Minute))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if reloads, reported := counts(); reloads != 1 || reported != 0 {
			t.Fatalf("after a change: %d reloads, %d reported; want 1, 0", reloads, reported)
		}
		setFail(errors.New("refused"))
		write("ccc", base.Add(2*time.Minute))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if reloads, reported := counts(); reloads != 4 || reported != 1 {
			t.Fatalf("a refused change: %d reloads, %d reported; want 4 (one a look), 1", reloads, reported)
		}
		setFail(nil)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if reloads, reported := counts(); reloads != 5 || reported != 1 {
			t.Fatalf("once it loads: %d reloads, %d reported; want 5, 1", reloads, reported)
		}
	})
}

// A file rewritten with contents of the same size under the same
// modification time is a change: two tokens of one length made in the
// same second and installed by a tool that keeps modification times
// (tar's whole seconds, zip's two, rsync -a, cp -p) stamped alike, and
// the second was never loaded. The change time, which only the kernel
// sets, tells them apart, as does the new file a rename installs.
func TestStampSeesSameSizeSameModTime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	mod := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	install := func(body string, rename bool) {
		t.Helper()
		target := path
		if rename {
			target = path + ".new"
		}
		if err := os.WriteFile(target, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(target, mod, mod); err != nil {
			t.Fatal(err)
		}
		if rename {
			if err := os.Rename(target, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	install("token-aaaaaaaaaaaaaaaa", false)
	before := Of(path)
	time.Sleep(20 * time.Millisecond) // past the kernel clock tick change times are taken from
	install("token-bbbbbbbbbbbbbbbb", false)
	if Of(path) == before {
		t.Error("rewritten in place, same size and modification time: same stamp")
	}
	before = Of(path)
	time.Sleep(20 * time.Millisecond)
	install("token-cccccccccccccccc", true)
	if Of(path) == before {
		t.Error("installed by rename, same size and modification time: same stamp")
	}
	//lint:ignore SA4000 two reads of one unchanged file must stamp alike
	if Of(path) != Of(path) {
		t.Error("an unchanged file stamps differently")
	}
}
