package raftnet

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// goesSilent accepts links at addr on pn and answers the first call on
// each with success; every later call it reads and never answers, as a
// peer behind a cut that drops what it sends. It counts the links.
func goesSilent(t *testing.T, pn *pipeNet, addr string) *atomic.Int32 {
	t.Helper()
	l := pn.listen(addr)
	t.Cleanup(func() { l.Close() })
	var links atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			links.Add(1)
			go func() {
				defer c.Close()
				if _, err := readHello(c, "", nil); err != nil {
					return
				}
				r := bufio.NewReader(c)
				if answerOne(r, c) != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r)
			}()
		}
	}()
	return &links
}

// answerOne reads a request from r and answers it with success on w.
func answerOne(r *bufio.Reader, w io.Writer) error {
	f, _, err := readFrame(r, nil)
	if err != nil {
		return err
	}
	_, err = w.Write(appendResponse(nil, f.id, &raft.AppendEntriesResponse{Term: 1, Success: true}, nil))
	return err
}

// A link that answered and then went silent is failed after the silence,
// not after a whole call timeout: behind a cut, its TCP connection would
// wait out retransmission backoff long after the cut heals, holding
// every group's calls to the peer. The next call dials a new link.
func TestLinkSilentForTheSilenceFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 10*time.Second)
		aT := mustTransport(t, a, "g")
		links := goesSilent(t, pn, "peer")
		if _, err := appendEntries(aT, "peer", 1, 1); err != nil {
			t.Fatalf("the first call: %v", err)
		}
		start := time.Now()
		_, err := appendEntries(aT, "peer", 2, 1)
		took := time.Since(start)
		if !errors.Is(err, errTimeout) {
			t.Fatalf("got %v, want a timeout", err)
		}
		// The watch ticks every quarter of the silence.
		if took < defaultSilence || took > defaultSilence+defaultSilence/2 {
			t.Errorf("the silent link failed after %s, want %s to %s", took, defaultSilence, defaultSilence+defaultSilence/2)
		}
		if _, err := appendEntries(aT, "peer", 3, 1); err != nil {
			t.Fatalf("the call after the failed link: %v", err)
		}
		if n := links.Load(); n != 2 {
			t.Errorf("%d links dialed, want 2", n)
		}
	})
}

// A call waiting no longer than the silence on a link that answers other
// calls meanwhile is not failed, and neither is its link: only silence
// counts, not a slow answer.
func TestSlowAnswerOnALiveLinkIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 10*time.Second)
		b, bAddr := bareNet(t, pn, "b", 10*time.Second)
		aSlow, aFast := mustTransport(t, a, "slow"), mustTransport(t, a, "fast")
		slow, fast := mustTransport(t, b, "slow"), mustTransport(t, b, "fast")
		answer(fast)
		answerAfter(slow, 2*defaultSilence)
		res := make(chan error, 1)
		go func() {
			_, err := appendEntries(aSlow, bAddr, 1, 1)
			res <- err
		}()
		// The other group's calls keep the link talking.
		for i := range 2 * int(defaultSilence/(100*time.Millisecond)) {
			if _, err := appendEntries(aFast, bAddr, uint64(i), 1); err != nil {
				t.Fatalf("the other group's call %d: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := <-res; err != nil {
			t.Fatalf("the slow call on a live link: %v", err)
		}
	})
}

// A dial that gets no answer gives up after the dial timeout, not the
// call timeout: a dial sent into a partition that heals meanwhile would
// wait for the kernel's next SYN, seconds later, while a new one gets
// through at once.
func TestDialGivesUpAfterTheDialTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 10*time.Second)
		aT := mustTransport(t, a, "g")
		never := pn.listen("never") // accepts nothing: the dial waits
		defer never.Close()
		start := time.Now()
		if _, err := appendEntries(aT, "never", 1, 1); err == nil {
			t.Fatal("a call to a peer that never accepts succeeded")
		}
		if took := time.Since(start); took != defaultDialTimeout {
			t.Errorf("the dial gave up after %s, want %s", took, defaultDialTimeout)
		}
	})
}

// Config's defaults: the dial timeout and the silence never exceed the
// timeout a test or a node sets.
func TestDefaultsFollowAShorterTimeout(t *testing.T) {
	n := New(Config{Layer: newPipeNet().listen("x"), Timeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	defer n.Close()
	if n.cfg.DialTimeout != time.Second || n.cfg.Silence != time.Second {
		t.Errorf("dial timeout %s, silence %s, want both 1s", n.cfg.DialTimeout, n.cfg.Silence)
	}
	m := New(Config{Layer: newPipeNet().listen("y"), Logger: slog.New(slog.DiscardHandler)})
	defer m.Close()
	if m.cfg.DialTimeout != defaultDialTimeout || m.cfg.Silence != defaultSilence {
		t.Errorf("dial timeout %s, silence %s, want %s and %s", m.cfg.DialTimeout, m.cfg.Silence, defaultDialTimeout, defaultSilence)
	}
}

// slowReader reads at most chunk bytes each delay: a slow network.
type slowReader struct {
	r     io.Reader
	chunk int
	delay time.Duration
}

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.delay)
	return s.r.Read(p[:min(len(p), s.chunk)])
}

// A big frame pushed through a slow network (a lagging follower's catch-up
// over a thin link) takes longer than the silence to leave, and nothing
// can come back meanwhile: its answers, and the heartbeats' behind it,
// wait for it. That is not silence, and the link is kept; else the
// retry would send the same frame, and fail the same way, forever.
func TestBigFrameOnASlowLinkIsNotSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", 10*time.Second)
		aT := mustTransport(t, a, "g")
		l := pn.listen("slow")
		defer l.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			if _, err := readHello(c, "", nil); err != nil {
				return
			}
			// 64 kB each 100 ms: 4 MB take 6.4 s.
			r := bufio.NewReader(slowReader{r: c, chunk: 64 << 10, delay: 100 * time.Millisecond})
			for answerOne(r, c) == nil {
			}
		}()
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 1, PrevLogEntry: 1, PrevLogTerm: 1,
			Entries: []*raft.Log{{Index: 2, Term: 1, Data: make([]byte, 4<<20)}}}
		start := time.Now()
		if err := aT.AppendEntries("peer", "slow", req, &raft.AppendEntriesResponse{}); err != nil {
			t.Fatalf("a big frame on a slow link failed after %s: %v", time.Since(start), err)
		}
		if took := time.Since(start); took < 2*defaultSilence {
			t.Fatalf("the frame took %s, under twice the silence: the test shows nothing", took)
		}
		a.Close() // the peer's reader sees the link close and returns
		<-done
	})
}
