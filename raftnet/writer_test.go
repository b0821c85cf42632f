package raftnet

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Frames added from many goroutines at once arrive whole and each
// goroutine's in the order it added them, however the writer's rounds
// fall (a round may find nothing: its frames went out with the round
// before, and the next round must not write over what this one sends).
func TestWriterKeepsFramesWhole(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w := newWriter(a, 5*time.Second)
	defer w.close(net.ErrClosed)
	const senders, each = 8, 2000
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				payload := bytes.Repeat([]byte{byte(s)}, 1+(i*7+s)%300)
				err := w.add(func(buf []byte) ([]byte, error) {
					buf, at := beginFrame(buf, kindResponse, uint64(s)<<32|uint64(i))
					buf = append(buf, payload...)
					return endFrame(buf, at), nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	r := bufio.NewReader(b)
	next := make([]uint64, senders)
	var buf []byte
	for range senders * each {
		f, nb, err := readFrame(r, buf)
		buf = nb
		if err != nil {
			t.Fatal(err)
		}
		s, i := f.id>>32, f.id&(1<<32-1)
		if s >= senders || i != next[s] {
			t.Fatalf("frame %d of sender %d arrived, want %d", i, s, next[s])
		}
		next[s]++
		want := bytes.Repeat([]byte{byte(s)}, 1+(int(i)*7+int(s))%300)
		if !bytes.Equal(f.body, want) {
			t.Fatalf("frame %d of sender %d: body %v, want %v", i, s, summary(f.body), summary(want))
		}
	}
	wg.Wait()
}

func summary(b []byte) string {
	if len(b) > 8 {
		return fmt.Sprintf("%v… (%d bytes)", b[:8], len(b))
	}
	return fmt.Sprint(b)
}

// The caller that writes leaves once its own frame is out, however long
// others keep adding frames. It used to write until it found nothing
// pending: on a link kept busy by other groups (a peer reading no faster
// than they send), one group's heartbeat or replication call stayed in
// add, writing their frames, for as long as the traffic lasted; raft got
// no answer from that call, sent that group's peer nothing more, and the
// follower, hearing nothing, called an election in a healthy group.
func TestWriterCallerLeavesAfterItsOwnFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		w := newWriter(a, 5*time.Second)
		defer w.close(net.ErrClosed)
		go func() { // a peer that reads once a millisecond: every write waits for it
			buf := make([]byte, 64<<10)
			for {
				time.Sleep(time.Millisecond)
				if _, err := b.Read(buf); err != nil {
					return
				}
			}
		}()
		frame := func(b []byte) ([]byte, error) {
			b, at := beginFrame(b, kindResponse, 1)
			return endFrame(append(b, make([]byte, 100)...), at), nil
		}
		const busy = 10 * time.Second
		start := time.Now()
		for range 2 { // other groups: a frame every half millisecond each
			go func() {
				for time.Since(start) < busy {
					time.Sleep(time.Millisecond / 2)
					if err := w.add(frame); err != nil {
						return
					}
				}
			}()
		}
		if err := w.add(frame); err != nil { // finds nobody writing: writes
			t.Fatal(err)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("add returned after %s, writing others' frames (they came for %s)", took, busy)
		}
		time.Sleep(busy + time.Second) // let the others end
	})
}
