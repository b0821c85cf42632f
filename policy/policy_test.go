package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/window"
)

const sec = int64(time.Second)

func TestValidateNamesTheField(t *testing.T) {
	minute := window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: 60 * sec}
	hour := window.Limit{Algorithm: window.SlidingCounter, Limit: 500, Window: 3600 * sec, Buckets: 60}
	long := make([]window.Limit, MaxLimits+1)
	for i := range long {
		long[i] = window.Limit{Algorithm: window.FixedWindow, Limit: 1, Window: int64(i+1) * sec}
	}
	for _, tc := range []struct {
		p     Policy
		field string
	}{
		{Policy{Name: "ok", Limits: []window.Limit{minute, hour}}, ""},
		{Policy{Limits: nil}, "limits"},
		{Policy{Limits: long}, "limits"},
		{Policy{Name: string(make([]byte, MaxNameLen+1)), Limits: []window.Limit{minute}}, "name"},
		{Policy{Limits: []window.Limit{minute, {Algorithm: window.FixedWindow, Limit: 0, Window: sec}}}, "limits[1].limit"},
		{Policy{Limits: []window.Limit{minute, {Algorithm: window.FixedWindow, Limit: 5, Window: 60 * sec}}}, "limits[1].window"},
	} {
		err := tc.p.Validate(0)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.p, err)
			}
			continue
		}
		var fe *window.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, window.ErrInvalid) {
			t.Errorf("%v: got %v, want an error naming %s", tc.p.Limits, err, tc.field)
		}
	}
}

// 10/minute and 500/hour: admitted only when both admit, counted in both
// only then, and the answer names the limit that decided.
func TestEvaluateIsAtomic(t *testing.T) {
	p := &Policy{Name: "api", Limits: []window.Limit{
		{Algorithm: window.SlidingLog, Limit: 10, Window: 60 * sec},
		{Algorithm: window.SlidingCounter, Limit: 25, Window: 3600 * sec, Buckets: 60},
	}}
	states := []*window.State{{}, {}}
	now := int64(1_700_000_000) * sec
	admitted := 0
	for minute := 0; minute < 4; minute++ {
		for i := 0; i < 15; i++ {
			res := p.Evaluate(states, now+int64(minute)*60*sec+int64(i)*sec, 1)
			if res.Allowed {
				admitted++
				continue
			}
			if minute < 2 && res.Decider != 0 || minute == 3 && res.Decider != 1 {
				t.Fatalf("minute %d: denied by limit %d", minute, res.Decider)
			}
		}
		if minute == 2 {
			// Denials count nowhere: this minute the hour admitted 5 and
			// denied 10, and the minute log holds only the 5.
			if d := p.Limits[0].Check(states[0], now+2*60*sec+14*sec, 0); d.Remaining != 5 {
				t.Fatalf("minute limit has %d remaining, want 5: denied requests were counted", d.Remaining)
			}
		}
	}
	if admitted != 25 {
		t.Fatalf("admitted %d, want 10+10+5 (the hour's 25)", admitted)
	}
}

func TestEncodingRoundTrips(t *testing.T) {
	p := Policy{Name: "checkout", Limits: []window.Limit{
		{Algorithm: window.TokenBucket, Limit: 100, Window: sec, Burst: 20},
		{Algorithm: window.FixedWindow, Limit: 20000, Calendar: window.CalendarMonth},
	}}
	b := p.AppendBinary([]byte{0xAA})
	got, n, err := Decode(b[1:])
	if err != nil || n != len(b)-1 {
		t.Fatalf("decode: %v, %d of %d bytes", err, n, len(b)-1)
	}
	if got.Name != p.Name || len(got.Limits) != 2 || got.Limits[0] != p.Limits[0] || got.Limits[1] != p.Limits[1] {
		t.Fatalf("round trip: %+v", got)
	}
	for i := 0; i < len(b)-1; i++ {
		if _, _, err := Decode(b[1 : 1+i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", i, err)
		}
	}
}
