package cluster

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/floodgate/floodgate/fsm"
)

// importInParts imports a move whose export is too large for one entry in
// halves, halved again while too large: every slot once, in order, never
// a part over the cap; a part imported already (a retry) is skipped by imp
// and not sent again; a single slot too large, or any other error, stops
// it.
func TestImportInParts(t *testing.T) {
	slots := func(n int) []uint32 {
		s := make([]uint32, n)
		for i := range s {
			s[i] = uint32(10 + i)
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		n, fits  int   // slots, and the most one entry carries
		imported []int // slots imported before (a retry)
		failAt   uint32
		want     string // parts imported, or the error
	}{
		{"fits", 64, 64, nil, 0, "[10..73]"},
		{"halves", 64, 32, nil, 0, "[10..41] [42..73]"},
		{"uneven", 5, 2, nil, 0, "[10..11] [12] [13..14]"},
		{"quarters", 64, 20, nil, 0, "[10..25] [26..41] [42..57] [58..73]"},
		{"retry skips what is in", 8, 2, []int{10, 11, 12, 13}, 0, "[14..15] [16..17]"},
		{"a single slot too large", 4, 0, nil, 0, "error: too large"},
		{"another error stops it", 8, 2, nil, 14, "[10..11] [12..13] error: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := map[uint32]bool{}
			for _, x := range tc.imported {
				in[uint32(x)] = true
			}
			var got []string
			err := importInParts(slots(tc.n), func(part []uint32) error {
				if !slices.ContainsFunc(part, func(x uint32) bool { return !in[x] }) {
					return nil // imported already
				}
				if len(part) > tc.fits {
					return fmt.Errorf("%w: too large", fsm.ErrExportTooLarge)
				}
				if slices.Contains(part, tc.failAt) {
					return errors.New("boom")
				}
				for _, x := range part {
					if in[x] {
						t.Fatalf("slot %d imported twice", x)
					}
					in[x] = true
				}
				if len(part) == 1 {
					got = append(got, fmt.Sprintf("[%d]", part[0]))
				} else {
					got = append(got, fmt.Sprintf("[%d..%d]", part[0], part[len(part)-1]))
				}
				return nil
			})
			if err != nil {
				msg := err.Error()
				if errors.Is(err, fsm.ErrExportTooLarge) {
					msg = "too large"
				}
				got = append(got, "error: "+msg)
			}
			if s := fmt.Sprint(got); s != "["+tc.want+"]" {
				t.Errorf("got %s, want [%s]", s, tc.want)
			}
		})
	}
}
