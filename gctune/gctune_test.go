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

// A memory limit (GOMEMLIMIT, set from a container's limit) leaves the
// tuning on: without it a small heap is collected at every doubling.
func TestActive(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, c := range []struct {
		headroom uint64
		vars     map[string]string
		want     bool
	}{
		{256 << 20, nil, true},
		{256 << 20, map[string]string{"GOMEMLIMIT": "1073741824"}, true},
		{256 << 20, map[string]string{"GOGC": "200"}, false},
		{0, nil, false},
	} {
		if got := Active(c.headroom, env(c.vars)); got != c.want {
			t.Errorf("Active(%d, %v) = %v, want %v", c.headroom, c.vars, got, c.want)
		}
	}
}
