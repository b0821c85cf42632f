package raftnet

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
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
