package slots

import (
	"cmp"
	"slices"
)

// Member is a cluster node as the group planner sees it.
type Member struct {
	ID string
	// Active: not leaving, dead or being removed. Only active members are
	// homes; a group homed anywhere else (including on a node no longer
	// listed at all) is homeless.
	Active bool
}

// GroupState is an existing group as the group planner sees it.
type GroupState struct {
	ID GroupID
	// Home is the group's preferred leader node.
	Home string
	// Retiring groups are outside the target: the slot planner drains
	// them, then PlanGroups removes them.
	Retiring bool
	// Owns counts the slots the group owns, counting slots of in-flight
	// moves at their target (as Plan does): a retiring group with Owns 0
	// has nothing left to drain.
	Owns int
	// Busy: an in-flight move names the group, so it cannot be removed
	// yet (the meta FSM refuses it) even if it owns nothing.
	Busy bool
	// Unborn: no leader of the group ever reported. Only its home starts
	// it (as a one-server group), so the home may hold a started copy the
	// cluster has not heard of: homed anywhere else, it would be started a
	// second time, and the two copies would both lead it.
	Unborn bool
}

// stillborn reports whether g never started anywhere the cluster can
// know of and holds nothing: an unborn group owning no slot that no move
// names. Such a group is never homed elsewhere; it is removed instead.
func (g GroupState) stillborn() bool { return g.Unborn && g.Owns == 0 && !g.Busy }

// notStillborn orders stillborn groups first.
func notStillborn(g GroupState) int {
	if g.stillborn() {
		return 0
	}
	return 1
}

// GroupActionKind is what a GroupAction does.
type GroupActionKind int

// Group actions, each one meta command (MetaRehomeGroup, MetaAddGroup,
// MetaRetireGroup, MetaRemoveGroup).
const (
	// Rehome gives Group the new home Home and clears its Retiring flag:
	// its slots stay, only its preferred leader and replicas change.
	Rehome GroupActionKind = iota + 1
	// Add creates a new, empty group homed at Home (Group is unset: the
	// meta state allocates the id).
	Add
	// Retire takes Group out of the target so that its slots drain away.
	Retire
	// Remove deletes Group, which is retiring, owns nothing and no move
	// names.
	Remove
)

// String names the kind, for logs.
func (k GroupActionKind) String() string {
	switch k {
	case Rehome:
		return "rehome"
	case Add:
		return "add"
	case Retire:
		return "retire"
	case Remove:
		return "remove"
	}
	return "unknown"
}

// GroupAction is one change of the group set.
type GroupAction struct {
	Kind  GroupActionKind
	Group GroupID // every kind but Add
	Home  string  // Rehome and Add
}

// PlanGroups returns the changes that make every active member home to
// exactly perNode non-retiring groups and home no group anywhere else
// (docs/design/slots.md, Groups), in the order to make them. Members and
// groups are taken in sorted order, so the result is a deterministic
// function of its inputs whatever their order.
//
// A non-retiring group stays where it is if its home is active and it is
// among that home's perNode lowest ids. An active member lacks homes while
// it keeps fewer than perNode.
//
// Unborn groups (GroupState.Unborn) are never homed elsewhere, since their
// home may have started them already. One homed at an active member stays
// there if there is room once step 1 is done; if not, one of the groups
// its home keeps may go to a member lacking one (step 3), and otherwise it
// waits, left out of the plan, until it reports (then it is a group like
// any other). One whose home is not active is removed (step 5). The
// exception is an unborn group owning slots (the cluster's first groups,
// whose creator died before starting them), planned as any group, since
// only a new home can ever serve those slots. Then, in this order:
//
//  1. every other non-retiring group (its home left, died or was removed,
//     or homes too many after perNode shrank) is rehomed to a member
//     lacking homes, if any: the one with the fewest homes, counting as
//     its own the retiring groups homed there (step 2 gives them back)
//     and the unborn groups it starts, ties by id. Only its replicas move,
//     never its slots.
//  2. retiring groups are un-retired (Rehome) while members lack homes:
//     first each to its own home (a dead node came back, perNode grew
//     back), then to the member lacking the most. What a group still owns
//     is not moved again, and an emptied one saves creating a group.
//  3. members still lacking homes get, for each unborn group waiting at a
//     full home, that home's newest group (Rehome), then new groups
//     (Add), the one lacking the most first, ties by id.
//  4. the groups of step 1 that found no member lacking a home are
//     retired: so an overfull home keeps its lowest ids.
//  5. retiring groups left (step 4's too) that own nothing and no move
//     names are removed, and so are stillborn groups whose home is not
//     active.
//
// The actions come in that order. A plan either grows the group set
// (steps 1 to 3) or shrinks it (1, 4, 5), never both: groups are retired or
// removed only when no member lacks a home (but for unborn groups, which
// no other member may take). So it retires exactly the
// non-retiring groups beyond perNode times the active members, adds only
// what no existing group can fill, and changes the fewest homes (the
// tests check all three against brute force). It is stable under its own
// prefix: once acts[0] is applied (an Add creating a group with a higher
// id than any), PlanGroups returns acts[1:], as the meta leader applies
// one action per round.
//
// With no active member it returns nothing: the cluster never retires
// every group. perNode below 1 counts as 1 for the same reason.
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

	// homes counts the non-retiring groups each active member keeps. The
	// lowest ids stay, so the answer never depends on input order and an
	// overfull home gives up its newest groups. back counts the retiring
	// groups homed at each active member, which step 2 may give back, and
	// starting the unborn groups homed there, which stay if there is room
	// once step 1 is done.
	homes, back, starting := map[string]int{}, map[string]int{}, map[string]int{}
	var unkept, retiring, unborn, waiting []GroupState
	kept := map[string][]GroupID{} // the groups that stay, by home
	orphaned := map[GroupID]bool{} // stillborn, home not active: removed
	for _, g := range groups {
		switch {
		case g.Retiring:
			retiring = append(retiring, g)
			if active[g.Home] {
				back[g.Home]++
			}
		case g.stillborn() && active[g.Home]:
			unborn = append(unborn, g)
			starting[g.Home]++
		case active[g.Home] && homes[g.Home] < perNode:
			homes[g.Home]++
			kept[g.Home] = append(kept[g.Home], g.ID)
		case g.stillborn():
			orphaned[g.ID] = true
		default:
			unkept = append(unkept, g)
		}
	}
	// neediest is the active member lacking homes that lacks the most,
	// counting the groups it may get back or is starting as its own: a
	// group sent where one would come back anyway costs that one a home
	// change (or the cluster a new group) while another member had room.
	// Filling the emptiest first also gives every member its first group
	// soonest when actions are applied one at a time.
	neediest := func() (string, bool) {
		best, found := "", false
		weight := func(id string) int { return homes[id] + back[id] + starting[id] }
		for _, id := range ids {
			if homes[id] < perNode && (!found || weight(id) < weight(best)) {
				best, found = id, true
			}
		}
		return best, found
	}

	var out, retire []GroupAction
	retired := map[GroupID]bool{}
	// Step 1, groups of overfull homes included: moving a whole group to
	// a member lacking one costs no slot move, where retiring it and
	// adding one there would move its slots twice.
	for _, g := range unkept {
		if id, ok := neediest(); ok {
			homes[id]++
			out = append(out, GroupAction{Kind: Rehome, Group: g.ID, Home: id})
			continue
		}
		retired[g.ID] = true
		retire = append(retire, GroupAction{Kind: Retire, Group: g.ID})
	}
	// Unborn groups of active homes stay, as many as there is room for
	// after step 1 (a homeless group that keeps its slots is worth more
	// than an empty one); the others wait (step 2 and 3 may make room).
	for _, g := range unborn {
		starting[g.Home]--
		if homes[g.Home] < perNode {
			homes[g.Home]++
		} else {
			waiting = append(waiting, g)
		}
	}
	// Step 2, after step 1: a non-retiring group keeps its full share, a
	// retiring one only what is left of it. Own homes first: that is where
	// its leader and replicas are likely to be still. Stillborn ones first
	// there, so a home that has no room for one has not taken a group back
	// that step 3 would then move.
	unretired := map[GroupID]bool{}
	slices.SortStableFunc(retiring, func(a, b GroupState) int {
		return cmp.Compare(notStillborn(a), notStillborn(b))
	})
	for _, g := range retiring {
		switch {
		case active[g.Home] && homes[g.Home] < perNode:
			homes[g.Home]++
			back[g.Home]--
			unretired[g.ID] = true
			out = append(out, GroupAction{Kind: Rehome, Group: g.ID, Home: g.Home})
		case active[g.Home] && g.stillborn():
			waiting = append(waiting, g)
		}
	}
	for _, g := range retiring {
		if unretired[g.ID] || g.stillborn() {
			continue // a stillborn one only ever goes back to its own home
		}
		id, ok := neediest()
		if !ok {
			break
		}
		homes[id]++
		if active[g.Home] {
			back[g.Home]--
		}
		unretired[g.ID] = true
		out = append(out, GroupAction{Kind: Rehome, Group: g.ID, Home: id})
	}
	// Step 3, first for unborn groups waiting at a full home: one of the
	// groups it keeps goes to a member lacking one, making
	// room at home for the unborn one (un-retired if it was retiring), as
	// that costs no new group. The others wait, left out of the plan,
	// until they report.
	for _, g := range waiting {
		id, ok := neediest()
		if !ok || len(kept[g.Home]) == 0 {
			continue
		}
		// The newest it kept from the start: no action of this plan names
		// it, or brings another group to a home that has an unborn one
		// waiting, so applying some of them does not change the choice.
		last := len(kept[g.Home]) - 1
		homes[id]++
		out = append(out, GroupAction{Kind: Rehome, Group: kept[g.Home][last], Home: id})
		kept[g.Home] = kept[g.Home][:last]
		if g.Retiring {
			back[g.Home]--
			unretired[g.ID] = true
			out = append(out, GroupAction{Kind: Rehome, Group: g.ID, Home: g.Home})
		}
	}
	for {
		id, ok := neediest()
		if !ok {
			break
		}
		homes[id]++
		out = append(out, GroupAction{Kind: Add, Home: id})
	}
	// Step 4.
	out = append(out, retire...)
	// Step 5, groups step 4 retires included (so applying the plan one
	// action at a time replans its rest), not while Busy: the meta FSM
	// refuses to remove a group a move names, and a move out of it may be
	// between flip and import.
	for _, g := range groups {
		if (g.Retiring && !unretired[g.ID] || retired[g.ID] || orphaned[g.ID]) && g.Owns == 0 && !g.Busy {
			out = append(out, GroupAction{Kind: Remove, Group: g.ID})
		}
	}
	return out
}

// Target returns the groups that should own slots (Cluster.Target), in
// ascending order: not retiring, homed at an active member. Once
// PlanGroups returns nothing these are exactly the non-retiring groups,
// perNode per active member plus the unborn groups waiting to report.
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
