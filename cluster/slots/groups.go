package slots

import (
	"cmp"
	"slices"
)

// Member is a cluster node as the group planner sees it.
type Member struct {
	ID string
	// Active: not leaving, dead or being removed. Only active members are
	// homes.
	Active bool
}

// GroupState is an existing group as the group planner sees it.
type GroupState struct {
	ID       GroupID
	Home     string
	Retiring bool
	// Owns counts the slots the group owns, in-flight targets included.
	Owns int
	// Busy: an in-flight move names the group.
	Busy bool
}

// GroupActionKind is what a GroupAction does.
type GroupActionKind int

// Group actions.
const (
	// Rehome gives Group the new home Home.
	Rehome GroupActionKind = iota + 1
	// Add creates a group homed at Home.
	Add
	// Retire marks Group to be drained and removed.
	Retire
	// Remove deletes Group, which owns nothing and no move names.
	Remove
)

// GroupAction is one change of the group set.
type GroupAction struct {
	Kind  GroupActionKind
	Group GroupID
	Home  string
}

// PlanGroups returns the changes that make every active member home to
// exactly perNode groups, in the order to make them: groups of members
// that left are rehomed where a member lacks groups, members still lacking
// get new groups, groups left homeless (or beyond perNode on one home) are
// retired, and retired groups that own nothing are removed. With no active
// member it returns nothing: the cluster never retires every group.
func PlanGroups(members []Member, groups []GroupState, perNode int) []GroupAction {
	perNode = max(perNode, 1)
	active := map[string]bool{}
	var ids []string
	for _, m := range members {
		if m.Active && !active[m.ID] {
			active[m.ID] = true
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	groups = slices.SortedFunc(slices.Values(groups), func(a, b GroupState) int { return cmp.Compare(a.ID, b.ID) })
	homes := map[string]int{}
	var out []GroupAction
	var homeless []GroupState
	for _, g := range groups {
		switch {
		case g.Retiring:
		case active[g.Home] && homes[g.Home] < perNode:
			homes[g.Home]++
		case active[g.Home]:
			// One home too many (perNode shrank): drain the newest.
			out = append(out, GroupAction{Kind: Retire, Group: g.ID})
		default:
			homeless = append(homeless, g)
		}
	}
	// neediest is the active member with the fewest homes below perNode.
	neediest := func() (string, bool) {
		best, found := "", false
		for _, id := range ids {
			if homes[id] < perNode && (!found || homes[id] < homes[best]) {
				best, found = id, true
			}
		}
		return best, found
	}
	for _, g := range homeless {
		if id, ok := neediest(); ok {
			homes[id]++
			out = append(out, GroupAction{Kind: Rehome, Group: g.ID, Home: id})
			continue
		}
		out = append(out, GroupAction{Kind: Retire, Group: g.ID})
	}
	for {
		id, ok := neediest()
		if !ok {
			break
		}
		homes[id]++
		out = append(out, GroupAction{Kind: Add, Home: id})
	}
	for _, g := range groups {
		if g.Retiring && g.Owns == 0 && !g.Busy {
			out = append(out, GroupAction{Kind: Remove, Group: g.ID})
		}
	}
	return out
}

// Target returns the groups that should own slots: not retiring, homed at
// an active member.
func Target(groups []GroupState, members []Member) []GroupID {
	active := map[string]bool{}
	for _, m := range members {
		if m.Active {
			active[m.ID] = true
		}
	}
	var out []GroupID
	for _, g := range groups {
		if !g.Retiring && active[g.Home] {
			out = append(out, g.ID)
		}
	}
	slices.Sort(out)
	return out
}
