package slots

import (
	"reflect"
	"testing"
)

// members returns active members with the given ids.
func members(active ...string) []Member {
	var out []Member
	for _, id := range active {
		out = append(out, Member{ID: id, Active: true})
	}
	return out
}

// gone returns members with the given ids that are leaving or dead.
func gone(ids ...string) []Member {
	var out []Member
	for _, id := range ids {
		out = append(out, Member{ID: id})
	}
	return out
}

func TestPlanGroups(t *testing.T) {
	tests := []struct {
		name    string
		members []Member
		groups  []GroupState
		perNode int
		want    []GroupAction
	}{
		{
			name:    "fresh: three nodes, no group",
			members: members("n1", "n2", "n3"), perNode: 1,
			want: []GroupAction{{Kind: Add, Home: "n1"}, {Kind: Add, Home: "n2"}, {Kind: Add, Home: "n3"}},
		},
		{
			name:    "fresh: the bootstrap group stays",
			members: members("n1", "n2", "n3"), groups: []GroupState{{ID: 0, Home: "n1", Owns: 4096}}, perNode: 1,
			want: []GroupAction{{Kind: Add, Home: "n2"}, {Kind: Add, Home: "n3"}},
		},
		{
			name:    "settled",
			members: members("n1", "n2"), groups: []GroupState{{ID: 0, Home: "n1", Owns: 5}, {ID: 1, Home: "n2", Owns: 5}}, perNode: 1,
		},
		{
			name:    "join of n4",
			members: members("n1", "n2", "n3", "n4"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2"}, {ID: 2, Home: "n3"}}, perNode: 1,
			want: []GroupAction{{Kind: Add, Home: "n4"}},
		},
		{
			name:    "n2 leaves, the others full: retire",
			members: append(members("n1", "n3"), gone("n2")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Owns: 9}, {ID: 2, Home: "n3"}}, perNode: 1,
			want: []GroupAction{{Kind: Retire, Group: 1}},
		},
		{
			name:    "n2 leaves while n4 lacks a home: rehome, no slot moves",
			members: append(members("n1", "n3", "n4"), gone("n2")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Owns: 9}, {ID: 2, Home: "n3"}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 1, Home: "n4"}},
		},
		{
			name:    "a home no longer listed is gone too",
			members: members("n1"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n9", Owns: 3}}, perNode: 1,
			want: []GroupAction{{Kind: Retire, Group: 1}},
		},
		{
			name:    "dead node, two per node: one group finds room, the other retires",
			members: append(members("n1", "n3"), gone("n2")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 2, Home: "n3"}, {ID: 3, Home: "n3"}, {ID: 4, Home: "n2", Owns: 3}, {ID: 5, Home: "n2", Owns: 3}}, perNode: 2,
			want: []GroupAction{{Kind: Rehome, Group: 4, Home: "n1"}, {Kind: Retire, Group: 5}},
		},
		{
			name:    "homeless groups go to the member lacking the most, ties by id",
			members: append(members("n1", "n2"), gone("n3")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n3"}, {ID: 2, Home: "n3"}}, perNode: 2,
			want: []GroupAction{{Kind: Rehome, Group: 1, Home: "n2"}, {Kind: Rehome, Group: 2, Home: "n1"}, {Kind: Add, Home: "n2"}},
		},
		{
			name:    "emptied retiring group is removed",
			members: members("n1"), groups: []GroupState{{ID: 0, Home: "n1", Owns: 8}, {ID: 1, Home: "n2", Retiring: true}}, perNode: 1,
			want: []GroupAction{{Kind: Remove, Group: 1}},
		},
		{
			name:    "busy retiring group is not removed",
			members: members("n1"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Retiring: true, Busy: true}}, perNode: 1,
		},
		{
			name:    "retiring group still draining: nothing",
			members: members("n1"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Retiring: true, Owns: 5}}, perNode: 1,
		},
		{
			name:    "retiring group on a full home keeps draining",
			members: members("n1"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n1", Retiring: true, Owns: 3}}, perNode: 1,
		},
		{
			name:    "two per node",
			members: members("n1", "n2"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n1"}}, perNode: 2,
			want: []GroupAction{{Kind: Add, Home: "n2"}, {Kind: Add, Home: "n2"}},
		},
		{
			name:    "two per node, fresh: every node gets its first group first",
			members: members("n1", "n2"), perNode: 2,
			want: []GroupAction{{Kind: Add, Home: "n1"}, {Kind: Add, Home: "n2"}, {Kind: Add, Home: "n1"}, {Kind: Add, Home: "n2"}},
		},
		{
			name:    "perNode shrank: the highest ids retire",
			members: members("n1"), groups: []GroupState{{ID: 2, Home: "n1", Owns: 1}, {ID: 0, Home: "n1", Owns: 1}, {ID: 1, Home: "n1", Owns: 1}}, perNode: 1,
			want: []GroupAction{{Kind: Retire, Group: 1}, {Kind: Retire, Group: 2}},
		},
		{
			name:    "perNode shrank as a node joins: the extra group moves instead",
			members: members("n1", "n2"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n1"}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 1, Home: "n2"}},
		},
		{
			name:    "perNode grew back: the retired group returns",
			members: members("n1"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n1", Retiring: true, Owns: 3}}, perNode: 2,
			want: []GroupAction{{Kind: Rehome, Group: 1, Home: "n1"}},
		},
		{
			name:    "dead node back: its retiring group comes home with what it still owns",
			members: members("n1", "n2", "n3"),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Retiring: true, Owns: 700, Busy: true}, {ID: 2, Home: "n3"}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 1, Home: "n2"}},
		},
		{
			name:    "dead node back after its group emptied: reused, not removed and added",
			members: members("n1", "n2"),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Retiring: true}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 1, Home: "n2"}},
		},
		{
			name:    "a new node takes a draining group rather than a new one",
			members: append(members("n1", "n3", "n4"), gone("n2")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Retiring: true, Owns: 300}, {ID: 2, Home: "n3"}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 1, Home: "n4"}},
		},
		{
			name:    "its own home first, then the others",
			members: members("n1", "n2", "n3"),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n9", Retiring: true, Owns: 1}, {ID: 2, Home: "n3", Retiring: true, Owns: 1}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 2, Home: "n3"}, {Kind: Rehome, Group: 1, Home: "n2"}},
		},
		{
			name:    "a node back, one dead, one new: the homeless group leaves the returning node its own",
			members: append(members("n1", "n2", "n4"), gone("n3")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Retiring: true, Owns: 5}, {ID: 2, Home: "n3", Owns: 9}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 2, Home: "n4"}, {Kind: Rehome, Group: 1, Home: "n2"}},
		},
		{
			name:    "room for one: the non-retiring group wins it",
			members: append(members("n1", "n2"), gone("n3")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Retiring: true, Owns: 5}, {ID: 2, Home: "n3", Owns: 9}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 2, Home: "n2"}},
		},
		{
			name:    "shrinking: retire and remove in one plan",
			members: append(members("n1", "n3"), gone("n2")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Owns: 4}, {ID: 2, Home: "n3"}, {ID: 3, Home: "n9", Retiring: true}}, perNode: 1,
			want: []GroupAction{{Kind: Retire, Group: 1}, {Kind: Remove, Group: 3}},
		},
		{
			name:    "a group whose home died before it got slots: retired, then removed",
			members: append(members("n1"), gone("n2")...),
			groups:  []GroupState{{ID: 0, Home: "n1", Owns: 8}, {ID: 1, Home: "n2"}, {ID: 2, Home: "n2", Busy: true}}, perNode: 1,
			want: []GroupAction{{Kind: Retire, Group: 1}, {Kind: Retire, Group: 2}, {Kind: Remove, Group: 1}},
		},
		{
			name:    "a group whose home died before it reported: removed, never rehomed (it may have started there)",
			members: append(members("n1", "n3", "n4"), gone("n2")...),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Unborn: true}, {ID: 2, Home: "n3"}}, perNode: 1,
			want: []GroupAction{{Kind: Add, Home: "n4"}, {Kind: Remove, Group: 1}},
		},
		{
			name:    "a retiring unborn group goes back to its own home only",
			members: members("n1", "n2"),
			groups:  []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n9", Retiring: true, Unborn: true}, {ID: 2, Home: "n2", Retiring: true, Unborn: true}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 2, Home: "n2"}, {Kind: Remove, Group: 1}},
		},
		{
			name:    "an unborn group that owns slots is rehomed: the first groups of a cluster whose creator died",
			members: append(members("n2"), gone("n1")...),
			groups:  []GroupState{{ID: 0, Home: "n1", Unborn: true, Owns: 4096}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 0, Home: "n2"}},
		},
		{
			name:    "an unborn group its home has no room for waits until it reports",
			members: members("n1"), groups: []GroupState{{ID: 0, Home: "n1", Unborn: true}, {ID: 1, Home: "n1", Owns: 9}}, perNode: 1,
		},
		{
			name:    "a homeless group takes the room an unborn group would fill, which then waits",
			members: append(members("n1"), gone("n2")...),
			groups:  []GroupState{{ID: 0, Home: "n2", Owns: 9}, {ID: 1, Home: "n1", Unborn: true}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 0, Home: "n1"}},
		},
		{
			name:    "a homeless group goes where no unborn group starts",
			members: append(members("n1", "n3"), gone("n2")...),
			groups:  []GroupState{{ID: 1, Home: "n1", Unborn: true}, {ID: 5, Home: "n2", Owns: 9}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 5, Home: "n3"}},
		},
		{
			name:    "an unborn group waiting at a full home while a member lacks one: the home's newest group goes there",
			members: members("n1", "n2"),
			groups:  []GroupState{{ID: 0, Home: "n1", Owns: 5}, {ID: 1, Home: "n1", Owns: 5}, {ID: 2, Home: "n1", Unborn: true}}, perNode: 2,
			want: []GroupAction{{Kind: Rehome, Group: 1, Home: "n2"}, {Kind: Add, Home: "n2"}},
		},
		{
			name:    "a retiring unborn group comes home if a group there can go where one is lacking",
			members: members("n0", "n4"),
			groups:  []GroupState{{ID: 2, Home: "n0", Owns: 1}, {ID: 4, Home: "n0", Retiring: true, Unborn: true}}, perNode: 1,
			want: []GroupAction{{Kind: Rehome, Group: 2, Home: "n4"}, {Kind: Rehome, Group: 4, Home: "n0"}},
		},
		{
			name:    "no active member: nothing, not even removals",
			members: gone("n1"), groups: []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n1", Retiring: true}}, perNode: 1,
		},
		{
			name:    "perNode 0 counts as 1",
			members: members("n1"), perNode: 0,
			want: []GroupAction{{Kind: Add, Home: "n1"}},
		},
		{
			name:    "a member listed twice counts once",
			members: append(members("n1", "n1"), gone("n1")...), perNode: 1,
			want: []GroupAction{{Kind: Add, Home: "n1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanGroups(tt.members, tt.groups, tt.perNode)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("PlanGroups = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTarget(t *testing.T) {
	ms := append(members("n1", "n2"), gone("n3")...)
	gs := []GroupState{
		{ID: 5, Home: "n2"}, {ID: 1, Home: "n1"}, {ID: 2, Home: "n3"}, {ID: 3, Home: "n1", Retiring: true}, {ID: 4, Home: "n9"},
	}
	if got, want := Target(gs, ms), []GroupID{1, 5}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Target = %v, want %v", got, want)
	}
	if got := Target(gs, nil); got != nil {
		t.Fatalf("Target with no member = %v, want none", got)
	}
}

func TestGroupActionKindString(t *testing.T) {
	for k, want := range map[GroupActionKind]string{Rehome: "rehome", Add: "add", Retire: "retire", Remove: "remove", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}
