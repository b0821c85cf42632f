package slots

import (
	"reflect"
	"testing"
)

func TestNextBatch(t *testing.T) {
	seq := func(from, n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = from + i
		}
		return out
	}
	tests := []struct {
		name string
		c    Cluster
		plan []Move
		lim  Limits
		want []Move
	}{
		{
			name: "nothing to do",
			c:    Cluster{Groups: groups(1, 2), Target: []GroupID{1, 2}},
		},
		{
			name: "split by PerMove",
			c:    Cluster{Groups: groups(1, 2), Target: []GroupID{1, 2}},
			plan: []Move{{1, 2, seq(0, 5)}},
			lim:  Limits{PerMove: 2, PerGroup: 100, PerNode: 100, Total: 100},
			want: []Move{{1, 2, seq(0, 2)}, {1, 2, seq(2, 2)}, {1, 2, seq(4, 1)}},
		},
		{
			name: "PerGroup bounds what a new group receives at once",
			c:    Cluster{Groups: groups(1, 2, 3, 4), Target: []GroupID{1, 2, 3, 4}},
			plan: []Move{{1, 4, seq(0, 3)}, {2, 4, seq(10, 3)}, {3, 4, seq(20, 3)}},
			lim:  Limits{PerMove: 10, PerGroup: 4, PerNode: 100, Total: 100},
			want: []Move{{1, 4, seq(0, 3)}, {2, 4, seq(10, 1)}},
		},
		{
			name: "PerNode counts every group a node is home to",
			c: Cluster{
				Groups: []Group{{1, "a", true}, {2, "a", true}, {3, "b", true}, {4, "c", true}},
				Target: []GroupID{1, 2, 3, 4},
			},
			plan: []Move{{1, 3, seq(0, 2)}, {2, 4, seq(10, 2)}},
			lim:  Limits{PerMove: 10, PerGroup: 10, PerNode: 3, Total: 100},
			want: []Move{{1, 3, seq(0, 2)}, {2, 4, seq(10, 1)}},
		},
		{
			name: "Total counts moves in flight",
			c: Cluster{
				Groups: groups(1, 2, 3), Target: []GroupID{1, 2, 3},
				InFlight: []Move{{1, 2, seq(30, 3)}},
			},
			plan: []Move{{1, 3, seq(0, 5)}},
			lim:  Limits{PerMove: 10, PerGroup: 100, PerNode: 100, Total: 5},
			want: []Move{{1, 3, seq(0, 2)}},
		},
		{
			name: "limits used up in flight: nothing starts",
			c: Cluster{
				Groups: groups(1, 2, 3), Target: []GroupID{1, 2, 3},
				InFlight: []Move{{1, 2, seq(30, 4)}},
			},
			plan: []Move{{1, 3, seq(0, 5)}},
			lim:  Limits{PerMove: 10, PerGroup: 4, PerNode: 100, Total: 100},
		},
		{
			name: "groups not ready wait",
			c: Cluster{
				Groups: []Group{{1, "a", true}, {2, "b", false}, {3, "c", true}},
				Target: []GroupID{1, 2, 3},
			},
			plan: []Move{{1, 2, seq(0, 2)}, {1, 3, seq(5, 2)}},
			want: []Move{{1, 3, seq(5, 2)}},
		},
		{
			name: "draining groups outside the target goes first",
			c:    Cluster{Groups: groups(1, 2, 3), Target: []GroupID{1, 3}},
			plan: []Move{{1, 3, seq(0, 3)}, {2, 1, seq(10, 3)}},
			lim:  Limits{PerMove: 10, PerGroup: 100, PerNode: 100, Total: 4},
			want: []Move{{2, 1, seq(10, 3)}, {1, 3, seq(0, 1)}},
		},
		{
			name: "zero limits take the defaults",
			c:    Cluster{Groups: groups(1, 2), Target: []GroupID{1, 2}},
			plan: []Move{{1, 2, seq(0, 100)}},
			want: []Move{{1, 2, seq(0, 64)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NextBatch(tt.c, tt.plan, tt.lim)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("NextBatch = %v, want %v", got, tt.want)
			}
		})
	}
}
