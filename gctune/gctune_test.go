package gctune

import "testing"

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 256 * mib, 2000},         // nothing live yet: the most
		{8 * mib, 256 * mib, 2000},   // capped
		{32 * mib, 256 * mib, 800},   // 32 MiB may grow by 256
		{128 * mib, 256 * mib, 200},  //
		{256 * mib, 256 * mib, 100},  // Go's default from here on
		{4096 * mib, 256 * mib, 100}, // never below it
		{100 * mib, 0, 100},          // no headroom: the default
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.headroom/mib, got, c.want)
		}
	}
}
