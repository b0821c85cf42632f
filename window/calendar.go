package window

import (
	"math"
	"time"
)

// Lengths of the fixed-length calendar units. UTC has no daylight saving
// and Unix time has no leap seconds, so minutes, hours, days and weeks are
// plain multiples of a nanosecond count; only months and years need the
// calendar.
const (
	minuteNs = int64(time.Minute)
	hourNs   = int64(time.Hour)
	dayNs    = 24 * hourNs
	weekNs   = 7 * dayNs
	// mondayNs is 1969-12-29 00:00 UTC, the Monday before the epoch (a
	// Thursday): ISO weeks are aligned to it.
	mondayNs = -3 * dayNs
)

// PeriodStart is the start (Unix ns) of the UTC calendar period of unit u
// that contains t: the minute, hour, day, ISO week (Monday 00:00 UTC),
// month or year. For CalendarNone or an unknown unit it returns t.
func PeriodStart(u Unit, t int64) int64 {
	switch u {
	case CalendarMinute:
		return t - floorMod(t, minuteNs, 0)
	case CalendarHour:
		return t - floorMod(t, hourNs, 0)
	case CalendarDay:
		return t - floorMod(t, dayNs, 0)
	case CalendarWeek:
		return t - floorMod(t, weekNs, mondayNs)
	case CalendarMonth:
		y, m, _ := time.Unix(0, t).UTC().Date()
		return unixNano(time.Date(y, m, 1, 0, 0, 0, 0, time.UTC))
	case CalendarYear:
		return unixNano(time.Date(time.Unix(0, t).UTC().Year(), time.January, 1, 0, 0, 0, 0, time.UTC))
	}
	return t
}

// PeriodEnd is the end (exclusive, Unix ns) of the UTC calendar period of
// unit u that contains t, which is the start of the next one; it saturates
// at math.MaxInt64 past the int64 range. For CalendarNone or an unknown
// unit it returns t.
func PeriodEnd(u Unit, t int64) int64 {
	switch u {
	case CalendarMinute:
		return satAdd(PeriodStart(u, t), minuteNs)
	case CalendarHour:
		return satAdd(PeriodStart(u, t), hourNs)
	case CalendarDay:
		return satAdd(PeriodStart(u, t), dayNs)
	case CalendarWeek:
		return satAdd(PeriodStart(u, t), weekNs)
	case CalendarMonth:
		y, m, _ := time.Unix(0, t).UTC().Date()
		// time.Date normalizes month 13 to January of the next year.
		return unixNano(time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC))
	case CalendarYear:
		return unixNano(time.Date(time.Unix(0, t).UTC().Year()+1, time.January, 1, 0, 0, 0, 0, time.UTC))
	}
	return t
}

// floorMod is (t - origin) mod d, in [0, d), computed without forming
// t - origin, which could overflow near the ends of the int64 range.
func floorMod(t, d, origin int64) int64 {
	m := (t%d - origin%d) % d
	if m < 0 {
		m += d
	}
	return m
}

// unixNano is t in Unix nanoseconds, saturating where Time.UnixNano's
// result would be undefined (outside years 1678-2262).
func unixNano(t time.Time) int64 {
	const maxSec = math.MaxInt64 / int64(time.Second)
	sec := t.Unix()
	switch {
	case sec > maxSec:
		return math.MaxInt64
	case sec < -maxSec:
		return math.MinInt64
	}
	return satAdd(sec*int64(time.Second), int64(t.Nanosecond()))
}
