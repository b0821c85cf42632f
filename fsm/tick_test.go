package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A tick looks at a 32nd of the records, between sweepPerTick and
// maxTickSweep, and a group whose 32nd is over the cap ticks as much more
// often: its sweeper still passes every record within 32 ticks of the
// base interval.
func TestTickPace(t *testing.T) {
	base := 10 * time.Second
	for _, c := range []struct {
		records, sweep int
		every          time.Duration
	}{
		{0, sweepPerTick, base},
		{1000, sweepPerTick, base},
		{32 * sweepPerTick, sweepPerTick, base},
		{32 * 5000, 5000, base},
		{32 * maxTickSweep, maxTickSweep, base},
		{64 * maxTickSweep, maxTickSweep, base / 2},
		{2_000_000, maxTickSweep, 2621440000}, // 10 s × 16384 / 62500
	} {
		if got := tickSweep(c.records); got != c.sweep {
			t.Errorf("tickSweep(%d) = %d, want %d", c.records, got, c.sweep)
		}
		every := TickInterval(base, c.records)
		if every != c.every {
			t.Errorf("TickInterval(%v, %d) = %v, want %v", base, c.records, every, c.every)
		}
		// Every record within 32 base intervals, to the tick.
		if pass := time.Duration((c.records+c.sweep-1)/c.sweep) * every; c.records > 0 && pass > 32*base+every {
			t.Errorf("%d records: a pass takes %v", c.records, pass)
		}
	}
}

// A tick entry sweeps tickSweep of the table's records: at 600,000 (a
// 32nd is 18,750) it looks at maxTickSweep of them and no more.
func TestTickSweepIsCapped(t *testing.T) {
	s := NewShard()
	for i := range 600_000 {
		s.tab.insert(testID(fmt.Sprintf("t%d", i)), expiringAt(1<<40))
	}
	for i, want := range []uint32{maxTickSweep, 2 * maxTickSweep} {
		s.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: EncodeTick(int64(i+1) * sec)})
		if s.tab.cursor != want {
			t.Fatalf("after tick %d the sweeper is at record %d, want %d", i+1, s.tab.cursor, want)
		}
	}
	if st := s.Stats(); st.Records != 600_000 || st.States != 600_000 {
		t.Fatalf("stats %+v", st)
	}
}
