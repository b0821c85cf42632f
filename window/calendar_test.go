package window

import (
	"math"
	"testing"
	"time"
)

func TestPeriodStartEnd(t *testing.T) {
	at := utc(2024, 2, 29, 12, 34, 56, 789)
	for _, tc := range []struct {
		u          Unit
		t          int64
		start, end int64
	}{
		{CalendarMinute, at, utc(2024, 2, 29, 12, 34, 0, 0), utc(2024, 2, 29, 12, 35, 0, 0)},
		{CalendarHour, at, utc(2024, 2, 29, 12, 0, 0, 0), utc(2024, 2, 29, 13, 0, 0, 0)},
		{CalendarDay, at, utc(2024, 2, 29, 0, 0, 0, 0), utc(2024, 3, 1, 0, 0, 0, 0)},
		{CalendarWeek, at, utc(2024, 2, 26, 0, 0, 0, 0), utc(2024, 3, 4, 0, 0, 0, 0)},
		{CalendarMonth, at, utc(2024, 2, 1, 0, 0, 0, 0), utc(2024, 3, 1, 0, 0, 0, 0)},
		{CalendarYear, at, utc(2024, 1, 1, 0, 0, 0, 0), utc(2025, 1, 1, 0, 0, 0, 0)},
		// Month lengths: leap years, the century rule and its exception.
		{CalendarMonth, utc(2025, 2, 14, 0, 0, 0, 0), utc(2025, 2, 1, 0, 0, 0, 0), utc(2025, 3, 1, 0, 0, 0, 0)},
		{CalendarMonth, utc(2100, 2, 14, 0, 0, 0, 0), utc(2100, 2, 1, 0, 0, 0, 0), utc(2100, 3, 1, 0, 0, 0, 0)},
		{CalendarMonth, utc(2000, 2, 14, 0, 0, 0, 0), utc(2000, 2, 1, 0, 0, 0, 0), utc(2000, 3, 1, 0, 0, 0, 0)},
		{CalendarMonth, utc(2024, 12, 31, 23, 59, 59, 999999999), utc(2024, 12, 1, 0, 0, 0, 0), utc(2025, 1, 1, 0, 0, 0, 0)},
		{CalendarMonth, utc(2025, 1, 1, 0, 0, 0, 0), utc(2025, 1, 1, 0, 0, 0, 0), utc(2025, 2, 1, 0, 0, 0, 0)},
		// ISO weeks start on Monday: 2024-01-01 is one, 2023-01-01 a Sunday,
		// and the epoch a Thursday.
		{CalendarWeek, utc(2024, 1, 1, 0, 0, 0, 0), utc(2024, 1, 1, 0, 0, 0, 0), utc(2024, 1, 8, 0, 0, 0, 0)},
		{CalendarWeek, utc(2023, 1, 1, 23, 0, 0, 0), utc(2022, 12, 26, 0, 0, 0, 0), utc(2023, 1, 2, 0, 0, 0, 0)},
		{CalendarWeek, 0, utc(1969, 12, 29, 0, 0, 0, 0), utc(1970, 1, 5, 0, 0, 0, 0)},
		{CalendarYear, utc(2023, 12, 31, 23, 59, 59, 999999999), utc(2023, 1, 1, 0, 0, 0, 0), utc(2024, 1, 1, 0, 0, 0, 0)},
		// Past the int64 range the end saturates.
		{CalendarYear, math.MaxInt64, utc(2262, 1, 1, 0, 0, 0, 0), math.MaxInt64},
		{CalendarMonth, math.MaxInt64, utc(2262, 4, 1, 0, 0, 0, 0), math.MaxInt64},
		{CalendarDay, math.MaxInt64, utc(2262, 4, 11, 0, 0, 0, 0), math.MaxInt64},
		// No unit, no period.
		{CalendarNone, at, at, at},
	} {
		if s, e := PeriodStart(tc.u, tc.t), PeriodEnd(tc.u, tc.t); s != tc.start || e != tc.end {
			t.Errorf("%s of %v: [%v, %v), want [%v, %v)", tc.u, time.Unix(0, tc.t).UTC(),
				time.Unix(0, s).UTC(), time.Unix(0, e).UTC(), time.Unix(0, tc.start).UTC(), time.Unix(0, tc.end).UTC())
		}
	}
}
