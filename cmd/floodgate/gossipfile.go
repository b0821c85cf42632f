package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/floodgate/floodgate/filewatch"
)

// gossipFile puts the keys of --gossip-key-file in use when the file
// changes (and on SIGHUP), so that the gossip key rotates without a
// restart: add the new key after the old on every node, then put it
// first, then drop the old one.
type gossipFile struct {
	path string

	// reloading, a one-slot channel (a lock that testing/synctest sees
	// as blocking), makes reloads (the watch's, SIGHUP's) one at a time:
	// two that interleave could leave the older read's keys in use under
	// the newer read's stamp, so the watch would never look again.
	reloading chan struct{}
	mu        sync.Mutex
	seen      filewatch.Stamp           // the file when its keys were last put in use
	apply     func(keys [][]byte) error // the node's; nil until it runs
}

// newGossipFile watches the keys of path, whose current keys the node
// starts with.
func newGossipFile(path string) *gossipFile {
	return &gossipFile{path: path, seen: filewatch.Of(path), reloading: make(chan struct{}, 1)}
}

// reload reads the file and gives its keys to the node; before the node
// runs, it does nothing (the node starts with the keys read at start).
// On error the keys in use stay.
func (g *gossipFile) reload() error {
	g.reloading <- struct{}{}
	defer func() { <-g.reloading }()
	st := filewatch.Of(g.path)
	g.mu.Lock()
	apply := g.apply
	g.mu.Unlock()
	if apply == nil {
		return nil
	}
	keys, err := readGossipKeys(g.path)
	if err != nil {
		return err
	}
	if err := apply(keys); err != nil {
		return err
	}
	g.mu.Lock()
	g.seen = st
	g.mu.Unlock()
	return nil
}

// watch gives the node's apply the file's keys whenever the file changes,
// looking every reloadEvery, until ctx ends.
func (g *gossipFile) watch(ctx context.Context, apply func(keys [][]byte) error, log *slog.Logger) {
	g.mu.Lock()
	g.apply = apply
	g.mu.Unlock()
	seen := func() filewatch.Stamp {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.seen
	}
	onErr := func(err error) {
		log.Error("reload of the gossip key file failed; the keys in use stay", "err", err)
	}
	filewatch.Watch(ctx, reloadEvery, []string{g.path}, seen, g.reload, onErr)
}
