package slots

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func members(active ...string) []Member {
	var out []Member
	for _, id := range active {
		out = append(out, Member{ID: id, Active: true})
	}
	return out
}

func TestPlanGroups(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []Member
		groups  []GroupState
		perNode int
		want    []GroupAction
	}{
		{"fresh cluster of three", members("n1", "n2", "n3"), []GroupState{{ID: 0, Home: "n1", Owns: 4096}}, 1,
			[]GroupAction{{Kind: Add, Home: "n2"}, {Kind: Add, Home: "n3"}}},
		{"settled", members("n1", "n2"), []GroupState{{ID: 0, Home: "n1", Owns: 5}, {ID: 1, Home: "n2", Owns: 5}}, 1, nil},
		{"join", members("n1", "n2", "n4"), []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2"}}, 1,
			[]GroupAction{{Kind: Add, Home: "n4"}}},
		{"leave, others full: retire", append(members("n1", "n3"), Member{ID: "n2"}),
			[]GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Owns: 9}, {ID: 2, Home: "n3"}}, 1,
			[]GroupAction{{Kind: Retire, Group: 1}}},
		{"leave while a node lacks a home: rehome", append(members("n1", "n4"), Member{ID: "n2"}),
			[]GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Owns: 9}}, 1,
			[]GroupAction{{Kind: Rehome, Group: 1, Home: "n4"}}},
		{"emptied retiring group is removed", members("n1"), []GroupState{{ID: 0, Home: "n1", Owns: 8}, {ID: 1, Home: "n2", Retiring: true}}, 1,
			[]GroupAction{{Kind: Remove, Group: 1}}},
		{"busy retiring group stays", members("n1"), []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n2", Retiring: true, Busy: true}}, 1, nil},
		{"two per node", members("n1", "n2"), []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n1"}}, 2,
			[]GroupAction{{Kind: Add, Home: "n2"}, {Kind: Add, Home: "n2"}}},
		{"per node shrank", members("n1"), []GroupState{{ID: 0, Home: "n1"}, {ID: 1, Home: "n1"}}, 1,
			[]GroupAction{{Kind: Retire, Group: 1}}},
		{"no active member: nothing", []Member{{ID: "n1"}}, []GroupState{{ID: 0, Home: "n1"}}, 1, nil},
	} {
		if got := PlanGroups(tc.members, tc.groups, tc.perNode); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Random membership changes, with the actions applied one at a time (as
// the meta leader does) and retiring groups drained: the group set always
// converges to perNode groups per active member, none homed elsewhere.
func TestPlanGroupsConverges(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		perNode := 1 + rng.IntN(2)
		nodes := map[string]bool{"n0": true}
		var groups []GroupState
		next := GroupID(0)
		for step := 0; step < 12; step++ {
			id := fmt.Sprintf("n%d", rng.IntN(5))
			nodes[id] = rng.IntN(3) > 0 || id == "n0"
			var ms []Member
			for n, a := range nodes {
				ms = append(ms, Member{ID: n, Active: a})
			}
			for round := 0; ; round++ {
				if round > 100 {
					t.Fatalf("seed %d: no convergence: %+v", seed, groups)
				}
				acts := PlanGroups(ms, groups, perNode)
				if len(acts) == 0 {
					break
				}
				a := acts[0]
				switch a.Kind {
				case Add:
					groups = append(groups, GroupState{ID: next, Home: a.Home})
					next++
				case Rehome, Retire, Remove:
					for i := range groups {
						if groups[i].ID != a.Group {
							continue
						}
						switch a.Kind {
						case Rehome:
							groups[i].Home, groups[i].Retiring = a.Home, false
						case Retire:
							groups[i].Retiring, groups[i].Owns = true, 0 // drained at once
						case Remove:
							groups = append(groups[:i], groups[i+1:]...)
						}
						break
					}
				}
			}
			homes := map[string]int{}
			for _, g := range groups {
				if g.Retiring {
					t.Fatalf("seed %d: a retiring group survived convergence", seed)
				}
				if !nodes[g.Home] {
					t.Fatalf("seed %d: group %d homed on inactive %s", seed, g.ID, g.Home)
				}
				homes[g.Home]++
			}
			for n, a := range nodes {
				if a && homes[n] != perNode {
					t.Fatalf("seed %d: %s is home to %d groups, want %d", seed, n, homes[n], perNode)
				}
			}
			if got := len(Target(groups, ms)); got != len(groups) {
				t.Fatalf("seed %d: %d targets of %d groups", seed, got, len(groups))
			}
		}
	}
}
