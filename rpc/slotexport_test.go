package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// waitHalfMoved waits until n sees two groups of slots/2 slots each and
// no move in flight: a second node's group took its half.
func waitHalfMoved(t *testing.T, n *inproc.Node, slots int) {
	t.Helper()
	inproc.Eventually(t, 60*time.Second, "half the slots moved to the new group", func() error {
		st := statusOf(t, n)
		if len(st.ShardStatus) != 2 || st.Moves > 0 {
			return fmt.Errorf("%d groups, %d moves in flight", len(st.ShardStatus), st.Moves)
		}
		for _, g := range st.ShardStatus {
			if g.Slots != int32(slots/2) {
				return fmt.Errorf("group %d owns %d slots", g.Id, g.Slots)
			}
		}
		return nil
	})
}

// importLog keeps a node's log lines and counts the import entries of
// the moves it closed ("slots imported ... entries=N").
type importLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *importLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *importLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *importLog) entries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range regexp.MustCompile(`msg="slots imported".* entries=(\d+)`).FindAllStringSubmatch(l.buf.String(), -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

// A move whose export is larger than gRPC's default answer (4 MiB) still
// goes through when the target's leader holds no replica of the source
// and asks the source's leader for it (Peer.ExportSlots): one replica per
// group, so the second node's new group imports half the first one's
// states over the network. The export went out, and the client refused
// it (ResourceExhausted) on every pass: the move never finished and its
// slots answered no check.
func TestLargeExportCrossesNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("two in-process nodes and 10 MB of key states")
	}
	const slots = 8
	one := func(c *cluster.Config) { c.Shards, c.Slots, c.Replicas = 0, slots, 1 }
	nodes := inproc.ClusterOf(t, 1, one)
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 5, WindowMs: time.Hour.Milliseconds()}
	pad := strings.Repeat("p", 400)
	for b := range 24 {
		reqs := make([]*pb.AllowRequest, 1000)
		for j := range reqs {
			reqs[j] = &pb.AllowRequest{Key: fmt.Sprintf("%s-%d-%d", pad, b, j), Limit: lim}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := nodes[0].Limiter().AllowBatch(ctx, &pb.AllowBatchRequest{Requests: reqs})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.Results {
			if r.Error != nil {
				t.Fatalf("batch %d: %s", b, r.Error.Message)
			}
		}
	}
	cfg := inproc.Config(t, "n2")
	one(&cfg)
	cfg.Join = []string{nodes[0].Cfg.GRPCAddr}
	logs := &importLog{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	inproc.Start(t, cfg)
	waitHalfMoved(t, nodes[0], slots)
	// The export (about 5 MiB) went in as pieces of at most
	// fsm.PieceBytes, not as one entry that holds up every group's
	// Raft traffic behind it. The line is logged once the move's close
	// has committed, so it may come just after the status shows it.
	inproc.Eventually(t, 10*time.Second, "the import logged", func() error {
		if !strings.Contains(logs.text(), `msg="slots imported"`) {
			return errors.New("no import logged yet")
		}
		return nil
	})
	if n := logs.entries(); n < 2 {
		t.Errorf("the move was imported in %d entries, want pieces of at most %d bytes", n, fsm.PieceBytes)
	}
	// Every key kept its count of one.
	for b := range 24 {
		key := fmt.Sprintf("%s-%d-%d", pad, b, 7)
		resp, err := nodes[0].Limiter().Allow(context.Background(), &pb.AllowRequest{Key: key, Limit: lim, Cost: ptr(int64(0))})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Remaining != 4 {
			t.Errorf("key %d-7 has %d left, want 4", b, resp.Remaining)
		}
	}
}
