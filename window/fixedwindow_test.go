package window

import (
	"testing"
	"time"
)

// The seed example: 2 per minute, requests at 0:40, 0:50, 1:10, 1:20, 1:40.
// The count resets at 1:00, so the third and fourth are admitted: four in
// 40 seconds, the fixed window's known burst at a boundary.
func TestFixedWindowExample(t *testing.T) {
	l := Limit{Algorithm: FixedWindow, Limit: 2, Window: 60 * sec}
	runSteps(t, l, []step{
		{40 * sec, 1, Decision{Allowed: true, Remaining: 1, ResetAt: 40 * sec}},
		{50 * sec, 1, Decision{Allowed: true, Remaining: 0, ResetAt: 60 * sec}},
		{70 * sec, 1, Decision{Allowed: true, Remaining: 1, ResetAt: 70 * sec}},
		{80 * sec, 1, Decision{Allowed: true, Remaining: 0, ResetAt: 120 * sec}},
		{100 * sec, 1, Decision{Remaining: 0, ResetAt: 120 * sec, RetryAfter: 20 * sec}},
		{120*sec - 1, 0, Decision{Remaining: 0, ResetAt: 120 * sec, RetryAfter: 1}},
		{120 * sec, 2, Decision{Allowed: true, Remaining: 0, ResetAt: 120 * sec}},
	})
}

func utc(y int, m time.Month, d, h, min, s, ns int) int64 {
	return time.Date(y, m, d, h, min, s, ns, time.UTC).UnixNano()
}

// A monthly quota of 20,000 resets on the 1st of each month at 00:00 UTC,
// whatever the length of the month.
func TestFixedWindowMonthlyQuota(t *testing.T) {
	l := Limit{Algorithm: FixedWindow, Limit: 20_000, Calendar: CalendarMonth}
	for _, tc := range []struct {
		name               string
		spend, last, reset int64
	}{
		{"leap February", utc(2024, 2, 3, 10, 0, 0, 0), utc(2024, 2, 29, 23, 59, 59, 999999999), utc(2024, 3, 1, 0, 0, 0, 0)},
		{"February", utc(2025, 2, 3, 10, 0, 0, 0), utc(2025, 2, 28, 23, 59, 59, 999999999), utc(2025, 3, 1, 0, 0, 0, 0)},
		{"February 2100 (not a leap year)", utc(2100, 2, 1, 0, 0, 0, 0), utc(2100, 2, 28, 23, 59, 59, 999999999), utc(2100, 3, 1, 0, 0, 0, 0)},
		{"December to January", utc(2024, 12, 31, 23, 0, 0, 0), utc(2024, 12, 31, 23, 59, 59, 999999999), utc(2025, 1, 1, 0, 0, 0, 0)},
		{"January", utc(2025, 1, 1, 0, 0, 0, 0), utc(2025, 1, 31, 0, 0, 0, 0), utc(2025, 2, 1, 0, 0, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s State
			l.Record(&s, tc.spend, 19_999)
			if d := l.Check(&s, tc.spend+1, 1); !d.Allowed || d.Remaining != 0 || d.ResetAt != tc.reset {
				t.Fatalf("the 20,000th unit: %+v, want allowed with reset at %v", d, time.Unix(0, tc.reset).UTC())
			}
			l.Record(&s, tc.spend+1, 1)
			if e := l.Expiry(&s); e != tc.reset {
				t.Fatalf("Expiry = %v, want %v", time.Unix(0, e).UTC(), time.Unix(0, tc.reset).UTC())
			}
			want := Decision{Remaining: 0, ResetAt: tc.reset, RetryAfter: tc.reset - tc.last}
			if d := l.Check(&s, tc.last, 1); d != want {
				t.Fatalf("at %v: %+v, want %+v", time.Unix(0, tc.last).UTC(), d, want)
			}
			if d := l.Check(&s, tc.reset, 1); !d.Allowed || d.Remaining != 19_999 {
				t.Fatalf("at %v: %+v, want a fresh quota", time.Unix(0, tc.reset).UTC(), d)
			}
		})
	}
}

// Weekly quotas reset on Monday 00:00 UTC (ISO weeks), also across a year
// end: 2024-12-30 is the Monday of ISO week 1 of 2025.
func TestFixedWindowWeekAndYear(t *testing.T) {
	week := Limit{Algorithm: FixedWindow, Limit: 1, Calendar: CalendarWeek}
	year := Limit{Algorithm: FixedWindow, Limit: 1, Calendar: CalendarYear}
	for _, tc := range []struct {
		l         Limit
		at, reset int64
	}{
		{week, utc(2024, 12, 29, 23, 59, 0, 0), utc(2024, 12, 30, 0, 0, 0, 0)}, // Sunday
		{week, utc(2024, 12, 30, 0, 0, 0, 0), utc(2025, 1, 6, 0, 0, 0, 0)},     // Monday
		{week, utc(2025, 1, 1, 12, 0, 0, 0), utc(2025, 1, 6, 0, 0, 0, 0)},      // Wednesday
		{year, utc(2024, 12, 31, 23, 59, 59, 0), utc(2025, 1, 1, 0, 0, 0, 0)},
		{year, utc(2024, 2, 29, 0, 0, 0, 0), utc(2025, 1, 1, 0, 0, 0, 0)},
	} {
		var s State
		tc.l.Record(&s, tc.at, 1)
		if d := tc.l.Check(&s, tc.at, 1); d.Allowed || d.ResetAt != tc.reset || d.RetryAfter != tc.reset-tc.at {
			t.Fatalf("%s at %v: %+v, want a reset at %v", tc.l.Calendar, time.Unix(0, tc.at).UTC(), d, time.Unix(0, tc.reset).UTC())
		}
		if d := tc.l.Check(&s, tc.reset, 1); !d.Allowed {
			t.Fatalf("%s at %v: %+v, want admitted", tc.l.Calendar, time.Unix(0, tc.reset).UTC(), d)
		}
	}
}

// Counts saturate instead of overflowing.
func TestFixedWindowSaturates(t *testing.T) {
	l := Limit{Algorithm: FixedWindow, Limit: MaxLimit, Window: 60 * sec}
	var s State
	l.Record(&s, 0, 1<<62)
	l.Record(&s, 0, 1<<62)
	l.Record(&s, 0, 1<<62)
	if s.B != 1<<63-1 {
		t.Fatalf("count %d, want saturated", s.B)
	}
	if d := l.Check(&s, 0, 0); d.Allowed || d.Remaining != 0 {
		t.Fatalf("%+v", d)
	}
}
