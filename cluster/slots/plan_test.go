package slots

import (
	"errors"
	"reflect"
	"testing"
)

// groups returns ready groups with the given ids, each its own home.
func groups(ids ...GroupID) []Group {
	out := make([]Group, len(ids))
	for i, id := range ids {
		out[i] = Group{ID: id, Home: "n" + string(rune('0'+id)), Ready: true}
	}
	return out
}

// table returns a table of the given runs: owner, count, owner, count...
func table(runs ...int) []GroupID {
	var t []GroupID
	for i := 0; i < len(runs); i += 2 {
		for range runs[i+1] {
			t = append(t, GroupID(runs[i]))
		}
	}
	return t
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name string
		c    Cluster
		want []Move
	}{
		{
			name: "balanced: nothing moves",
			c:    Cluster{Table: table(1, 4, 2, 4, 3, 4), Groups: groups(1, 2, 3), Target: []GroupID{1, 2, 3}},
		},
		{
			name: "empty cluster",
			c:    Cluster{Groups: groups(1), Target: []GroupID{1}},
		},
		{
			name: "join: the new group takes the highest slots of each",
			c:    Cluster{Table: table(1, 4, 2, 4, 3, 4), Groups: groups(1, 2, 3, 4), Target: []GroupID{1, 2, 3, 4}},
			want: []Move{{1, 4, []int{3}}, {2, 4, []int{7}}, {3, 4, []int{11}}},
		},
		{
			name: "leave: the drained group's slots spread in runs",
			c:    Cluster{Table: table(1, 3, 2, 3, 3, 3), Groups: groups(1, 2, 3), Target: []GroupID{1, 3}},
			want: []Move{{2, 1, []int{3, 4}}, {2, 3, []int{5}}}, // 9 = 5 + 4
		},
		{
			name: "remainder stays with the group already above the floor",
			c:    Cluster{Table: table(1, 3, 2, 4, 3, 3), Groups: groups(1, 2, 3), Target: []GroupID{1, 2, 3}},
		},
		{
			name: "remainder: 10 slots on 3 groups from one",
			c:    Cluster{Table: table(1, 10), Groups: groups(1, 2, 3), Target: []GroupID{1, 2, 3}},
			want: []Move{{1, 2, []int{4, 5, 6}}, {1, 3, []int{7, 8, 9}}},
		},
		{
			name: "all groups replaced",
			c:    Cluster{Table: table(1, 2, 2, 2), Groups: groups(1, 2, 3, 4), Target: []GroupID{3, 4}},
			want: []Move{{1, 3, []int{0, 1}}, {2, 4, []int{2, 3}}},
		},
		{
			name: "in-flight slots count at their target and do not move again",
			c: Cluster{
				Table: table(1, 6, 2, 2), Groups: groups(1, 2), Target: []GroupID{1, 2},
				InFlight: []Move{{1, 2, []int{4, 5}}}, // planned, not flipped
			},
		},
		{
			name: "in-flight flipped slots: the rest still balances",
			c: Cluster{
				Table: table(1, 6, 2, 2, 3, 0), Groups: groups(1, 2, 3), Target: []GroupID{1, 2, 3},
				InFlight: []Move{{1, 2, []int{6, 7}}}, // slots 6,7 already flipped to 2
			},
			want: []Move{{1, 2, []int{3}}, {1, 3, []int{4, 5}}}, // 8 = 3 + 3 + 2
		},
		{
			name: "in flight into a drained group: moved only once done",
			c: Cluster{
				Table: table(1, 2, 2, 2), Groups: groups(1, 2), Target: []GroupID{1},
				InFlight: []Move{{2, 1, []int{2}}},
			},
			want: []Move{{2, 1, []int{3}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Plan = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQuotasSpreadExtrasOverHomes(t *testing.T) {
	// Four empty groups, two per node, 6 slots held by a retiring group:
	// the two remainder slots go to one group of each node.
	c := Cluster{
		Table: table(9, 6),
		Groups: []Group{
			{ID: 1, Home: "a"}, {ID: 2, Home: "a"}, {ID: 3, Home: "b"}, {ID: 4, Home: "b"}, {ID: 9, Home: "c"},
		},
		Target: []GroupID{1, 2, 3, 4},
	}
	q, err := Quotas(c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[GroupID]int{1: 2, 2: 1, 3: 2, 4: 1}
	if !reflect.DeepEqual(q, want) {
		t.Fatalf("Quotas = %v, want %v", q, want)
	}
}

func TestPlanRefusesInvalid(t *testing.T) {
	tests := []struct {
		name string
		c    Cluster
	}{
		{"slot of an unknown group", Cluster{Table: table(1, 2, 7, 1), Groups: groups(1), Target: []GroupID{1}}},
		{"unknown target", Cluster{Table: table(1, 2), Groups: groups(1), Target: []GroupID{1, 2}}},
		{"target twice", Cluster{Table: table(1, 2), Groups: groups(1), Target: []GroupID{1, 1}}},
		{"group twice", Cluster{Table: table(1, 2), Groups: groups(1, 1), Target: []GroupID{1}}},
		{"slots and no target", Cluster{Table: table(1, 2), Groups: groups(1)}},
		{"slot in two moves", Cluster{Table: table(1, 2), Groups: groups(1, 2), Target: []GroupID{1, 2},
			InFlight: []Move{{1, 2, []int{1}}, {1, 2, []int{1}}}}},
		{"move of a slot its groups do not own", Cluster{Table: table(1, 2, 3, 1), Groups: groups(1, 2, 3), Target: []GroupID{1},
			InFlight: []Move{{1, 2, []int{2}}}}},
		{"move out of range", Cluster{Table: table(1, 2), Groups: groups(1, 2), Target: []GroupID{1},
			InFlight: []Move{{1, 2, []int{2}}}}},
		{"move to itself", Cluster{Table: table(1, 2), Groups: groups(1), Target: []GroupID{1},
			InFlight: []Move{{1, 1, []int{0}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Plan(tt.c); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Plan error = %v, want ErrInvalid", err)
			}
			if _, err := Quotas(tt.c); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Quotas error = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestApplyAndSlots(t *testing.T) {
	tab := table(1, 3)
	moves := []Move{{1, 2, []int{0, 2}}}
	if got, want := Apply(tab, moves), table(2, 1, 1, 1, 2, 1); !reflect.DeepEqual(got, want) {
		t.Fatalf("Apply = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(tab, table(1, 3)) {
		t.Fatal("Apply modified its table")
	}
	if n := Slots(moves); n != 2 {
		t.Fatalf("Slots = %d, want 2", n)
	}
}
