package raftlog

import (
	"path/filepath"
	"slices"
	"testing"
)

// Creating the log's directory syncs the parent of every directory it
// created, nearest first, so the new entries survive a power cut; an
// existing directory syncs nothing.
func TestMkdirDurableSyncsTheParentsOfWhatItCreated(t *testing.T) {
	root := t.TempDir()
	var synced []string
	record := func(d string) error { synced = append(synced, d); return nil }
	dir := filepath.Join(root, "a", "b", "raftlog")
	if err := mkdirDurable(dir, record); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "a", "b"), filepath.Join(root, "a"), root}
	if !slices.Equal(synced, want) {
		t.Errorf("synced %q, want %q", synced, want)
	}
	synced = nil
	if err := mkdirDurable(dir, record); err != nil || len(synced) != 0 {
		t.Errorf("an existing directory: synced %q, err %v; want nothing", synced, err)
	}
}
