package proptest

import (
	"flag"
	"strconv"
	"testing"
)

func TestRuns(t *testing.T) {
	short := testing.Short()
	defer flag.Set("test.short", strconv.FormatBool(short))
	for _, tc := range []struct {
		n           int
		race, short bool
		want        int
	}{
		{n: 20, want: 20},
		{n: 20, short: true, want: 5},
		{n: 20, race: true, want: 5},
		{n: 3, short: true, want: 1},
		{n: 1, short: true, want: 1},
	} {
		if tc.race != Race {
			continue // the race rows run in a -race build, the others in a plain one
		}
		flag.Set("test.short", strconv.FormatBool(tc.short))
		if got := Runs(tc.n); got != tc.want {
			t.Errorf("Runs(%d) race=%v short=%v = %d, want %d", tc.n, Race, tc.short, got, tc.want)
		}
	}
}
