package slots

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// GroupID names a Raft group. Ids are allocated by the meta state and never
// reused.
type GroupID uint32

// Group is one existing group and where it is placed.
type Group struct {
	ID GroupID
	// Home is the group's preferred leader node. NextBatch bounds the
	// moves per node by it; Plan spreads the groups that get one slot
	// above the floor over homes.
	Home string
	// Ready means the group has a leader and an initialized FSM: it can
	// freeze slots or import them now. Plan ignores it; NextBatch starts
	// only moves whose two groups are ready.
	Ready bool
}

// Move takes Slots (ascending, no duplicates) from group From to group To.
type Move struct {
	From, To GroupID
	Slots    []int
}

// Cluster is what the planner looks at, all from the meta state.
type Cluster struct {
	// Table is the owner of every slot; len(Table) is the slot count.
	Table []GroupID
	// Groups are every existing group, target or not.
	Groups []Group
	// Target are the groups that should own slots; every other group is
	// drained.
	Target []GroupID
	// InFlight are moves planned and not done yet. Their slots count as
	// owned by To (Table may still say From, until the flip) and are not
	// moved again until the move is done.
	InFlight []Move
}

// ErrInvalid marks a Cluster the planner refuses: a slot or move naming an
// unknown group, a slot in two moves, no target group while there are
// slots. Errors wrap it with the reason.
var ErrInvalid = errors.New("slots: invalid cluster")

// owners returns the effective owner of every slot (in-flight slots at
// their target) and which slots are in flight, after validating c.
func (c *Cluster) owners() (own []GroupID, moving []bool, err error) {
	known := make(map[GroupID]bool, len(c.Groups))
	for _, g := range c.Groups {
		if known[g.ID] {
			return nil, nil, fmt.Errorf("%w: group %d listed twice", ErrInvalid, g.ID)
		}
		known[g.ID] = true
	}
	target := make(map[GroupID]bool, len(c.Target))
	for _, id := range c.Target {
		if !known[id] {
			return nil, nil, fmt.Errorf("%w: target group %d does not exist", ErrInvalid, id)
		}
		if target[id] {
			return nil, nil, fmt.Errorf("%w: target group %d listed twice", ErrInvalid, id)
		}
		target[id] = true
	}
	if len(c.Table) > 0 && len(c.Target) == 0 {
		return nil, nil, fmt.Errorf("%w: %d slots and no target group", ErrInvalid, len(c.Table))
	}
	own = slices.Clone(c.Table)
	for s, id := range own {
		if !known[id] {
			return nil, nil, fmt.Errorf("%w: slot %d owned by unknown group %d", ErrInvalid, s, id)
		}
	}
	moving = make([]bool, len(own))
	for i, m := range c.InFlight {
		if !known[m.From] || !known[m.To] || m.From == m.To {
			return nil, nil, fmt.Errorf("%w: in-flight move %d: groups %d -> %d", ErrInvalid, i, m.From, m.To)
		}
		for _, s := range m.Slots {
			switch {
			case s < 0 || s >= len(own):
				return nil, nil, fmt.Errorf("%w: in-flight move %d: slot %d of %d", ErrInvalid, i, s, len(own))
			case moving[s]:
				return nil, nil, fmt.Errorf("%w: slot %d is in two in-flight moves", ErrInvalid, s)
			case own[s] != m.From && own[s] != m.To:
				return nil, nil, fmt.Errorf("%w: in-flight move %d: slot %d is owned by %d", ErrInvalid, i, s, own[s])
			}
			moving[s], own[s] = true, m.To
		}
	}
	return own, moving, nil
}

// Quotas returns how many slots each target group should own: the slot
// count divided evenly, the remainder one each to some groups. Those are
// chosen so the fewest slots move: groups already above the floor first,
// then groups whose home has fewer such extras so far (spreading slots
// over nodes when a node is home to several groups), then lower ids.
func Quotas(c Cluster) (map[GroupID]int, error) {
	own, _, err := c.owners()
	if err != nil {
		return nil, err
	}
	return quotas(c, own), nil
}

func quotas(c Cluster, own []GroupID) map[GroupID]int {
	q := make(map[GroupID]int, len(c.Target))
	if len(c.Target) == 0 {
		return q
	}
	count := counts(own)
	base, extra := len(own)/len(c.Target), len(own)%len(c.Target)
	home := make(map[GroupID]string, len(c.Groups))
	for _, g := range c.Groups {
		home[g.ID] = g.Home
	}
	for _, id := range c.Target {
		q[id] = base
	}
	perHome := map[string]int{}
	for range extra {
		var best GroupID
		found := false
		for _, id := range c.Target {
			if q[id] > base {
				continue
			}
			if !found || better(id, best, count, base, perHome, home) {
				best, found = id, true
			}
		}
		q[best]++
		perHome[home[best]]++
	}
	return q
}

// better reports whether a should get a remainder slot before b.
func better(a, b GroupID, count map[GroupID]int, base int, perHome map[string]int, home map[GroupID]string) bool {
	sa, sb := count[a] > base, count[b] > base // giving it one saves a move
	if sa != sb {
		return sa
	}
	if ha, hb := perHome[home[a]], perHome[home[b]]; ha != hb {
		return ha < hb
	}
	return a < b
}

func counts(own []GroupID) map[GroupID]int {
	n := map[GroupID]int{}
	for _, id := range own {
		n[id]++
	}
	return n
}

// Plan returns every move that takes c to balance: each target group owns
// its quota (Quotas) and every other group owns nothing. It moves the
// fewest slots possible: exactly the slots groups hold above their quota.
// Slots in flight stay where their move takes them and are not moved again
// now; a later Plan, once those moves are done, moves them if it must.
//
// A donor gives up its highest-numbered slots, receivers are filled in id
// order, and slots go in ascending runs, so owners keep contiguous ranges
// (the table stays short as runs). Moves are sorted by (From, To). The
// result is a deterministic function of c.
func Plan(c Cluster) ([]Move, error) {
	own, moving, err := c.owners()
	if err != nil {
		return nil, err
	}
	q := quotas(c, own)
	count := counts(own)
	// Slots each donor gives up: its highest-numbered movable slots
	// beyond its quota (q is 0 for groups outside the target).
	give := map[GroupID][]int{}
	for s := len(own) - 1; s >= 0; s-- {
		id := own[s]
		if moving[s] || count[id] <= q[id] {
			continue
		}
		give[id] = append(give[id], s)
		count[id]--
	}
	donors := make([]GroupID, 0, len(give))
	for id, ss := range give {
		slices.Sort(ss)
		donors = append(donors, id)
	}
	slices.Sort(donors)
	have := counts(own)
	var receivers []GroupID
	for _, id := range slices.Sorted(slices.Values(c.Target)) {
		if have[id] < q[id] {
			receivers = append(receivers, id)
		}
	}
	var out []Move
	add := func(from, to GroupID, s int) {
		for i := range out {
			if out[i].From == from && out[i].To == to {
				out[i].Slots = append(out[i].Slots, s)
				return
			}
		}
		out = append(out, Move{From: from, To: to, Slots: []int{s}})
	}
	r := 0
	for _, d := range donors {
		for _, s := range give[d] {
			for r < len(receivers) && have[receivers[r]] >= q[receivers[r]] {
				r++
			}
			if r == len(receivers) {
				// Every receiver is full: the rest of what donors hold
				// above quota is in flight and counted already. Cannot
				// happen with movable slots: quotas sum to the slot count.
				break
			}
			add(d, receivers[r], s)
			have[receivers[r]]++
		}
	}
	slices.SortFunc(out, func(a, b Move) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return out, nil
}

// Apply returns table with every slot of moves owned by its move's To: the
// table once those moves are done. table is not modified.
func Apply(table []GroupID, moves []Move) []GroupID {
	out := slices.Clone(table)
	for _, m := range moves {
		for _, s := range m.Slots {
			out[s] = m.To
		}
	}
	return out
}

// Slots counts the slots of moves.
func Slots(moves []Move) int {
	n := 0
	for _, m := range moves {
		n += len(m.Slots)
	}
	return n
}
