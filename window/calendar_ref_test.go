package window_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/window"
	"github.com/floodgate/floodgate/window/windowtest"
)

// Random times: every period contains its time, periods tile the line,
// they agree with the reference (Time.Truncate and AddDate), and weeks
// agree with Time.ISOWeek.
func TestPeriodsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	for range 20000 {
		tm := rng.Int64N(4e18)
		u := window.Unit(rng.IntN(int(window.CalendarYear)) + 1)
		s, e := window.PeriodStart(u, tm), window.PeriodEnd(u, tm)
		l := window.Limit{Calendar: u}
		rs, re := windowtest.Period(&l, tm)
		if s != rs || e != re || s > tm || tm >= e {
			t.Fatalf("%s of %d: [%d, %d), reference [%d, %d)", u, tm, s, e, rs, re)
		}
		if window.PeriodStart(u, e) != e || window.PeriodStart(u, e-1) != s || window.PeriodEnd(u, s) != e {
			t.Fatalf("%s periods of %d do not tile", u, tm)
		}
		if u == window.CalendarWeek {
			st, at := time.Unix(0, s).UTC(), time.Unix(0, tm).UTC()
			y1, w1 := st.ISOWeek()
			y2, w2 := at.ISOWeek()
			if y1 != y2 || w1 != w2 || st.Weekday() != time.Monday {
				t.Fatalf("week of %v starts %v", at, st)
			}
		}
	}
}
