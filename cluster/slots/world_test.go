package slots

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// world is a group set and its members, with group actions applied as the
// meta FSM applies them.
type world struct {
	t       *testing.T
	nodes   map[string]bool // listed members: active or not
	groups  []GroupState
	next    GroupID
	perNode int
}

func (w *world) clone() *world {
	c := *w
	c.nodes = make(map[string]bool, len(w.nodes))
	for id, a := range w.nodes {
		c.nodes[id] = a
	}
	c.groups = slices.Clone(w.groups)
	return &c
}

// members lists the members sorted, so failures print the same way.
func (w *world) members() []Member {
	var out []Member
	for id, a := range w.nodes {
		out = append(out, Member{ID: id, Active: a})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (w *world) plan() []GroupAction { return PlanGroups(w.members(), w.groups, w.perNode) }

func (w *world) active() []string {
	var out []string
	for _, m := range w.members() {
		if m.Active {
			out = append(out, m.ID)
		}
	}
	return out
}

func (w *world) find(id GroupID) int {
	for i := range w.groups {
		if w.groups[i].ID == id {
			return i
		}
	}
	w.t.Fatalf("action names group %d, which does not exist: %+v", id, w.groups)
	return -1
}

// apply makes one action, refusing what the meta FSM or the rules forbid:
// a home that is not an active member, retiring a retiring group, removing
// one that owns slots or that a move names.
func (w *world) apply(a GroupAction) {
	switch a.Kind {
	case Add, Rehome:
		if !w.nodes[a.Home] {
			w.t.Fatalf("%v: home %q is not an active member", a, a.Home)
		}
	}
	switch a.Kind {
	case Add:
		w.groups = append(w.groups, GroupState{ID: w.next, Home: a.Home, Unborn: true})
		w.next++
	case Rehome:
		i := w.find(a.Group)
		w.groups[i].Home, w.groups[i].Retiring = a.Home, false
	case Retire:
		i := w.find(a.Group)
		if w.groups[i].Retiring {
			w.t.Fatalf("%v: already retiring", a)
		}
		w.groups[i].Retiring = true // keeps its slots: they drain later
	case Remove:
		i := w.find(a.Group)
		if g := w.groups[i]; !g.Retiring && !w.orphaned(g) || g.Owns > 0 || g.Busy {
			w.t.Fatalf("%v: removes %+v", a, g)
		}
		w.groups = slices.Delete(w.groups, i, i+1)
	default:
		w.t.Fatalf("unknown action %v", a)
	}
}

// orphaned reports whether g is stillborn and its home is not active:
// the plan removes it, whatever else it does.
func (w *world) orphaned(g GroupState) bool { return g.stillborn() && !w.nodes[g.Home] }

// converged reports why the group set is not what PlanGroups aims at
// (every active member home to exactly perNode non-retiring groups, none
// homed elsewhere; unborn groups beyond those wait at their home), or "".
func (w *world) converged() string {
	born, unborn := map[string]int{}, map[string]int{}
	for _, g := range w.groups {
		if g.Retiring {
			continue
		}
		if !w.nodes[g.Home] {
			return fmt.Sprintf("group %d is homed on %q, not an active member", g.ID, g.Home)
		}
		if g.stillborn() {
			unborn[g.Home]++
		} else {
			born[g.Home]++
		}
	}
	for _, id := range w.active() {
		if want := max(w.perNode, 1); born[id] > want || born[id]+unborn[id] < want {
			return fmt.Sprintf("%s is home to %d groups and %d unborn ones, want %d", id, born[id], unborn[id], want)
		}
	}
	return ""
}

// cost is what a plan spends, worst first: groups that keep slots and are
// retired (their slots all move), groups created (filled from the others),
// groups that change home (their replicas move).
type cost struct{ retired, added, rehomed int }

func (c cost) less(d cost) bool {
	if c.retired != d.retired {
		return c.retired < d.retired
	}
	if c.added != d.added {
		return c.added < d.added
	}
	return c.rehomed < d.rehomed
}

// planCost is the cost of acts on w.
func planCost(w *world, acts []GroupAction) cost {
	var c cost
	for _, a := range acts {
		switch a.Kind {
		case Retire:
			c.retired++
		case Add:
			c.added++
		case Rehome:
			if w.groups[w.find(a.Group)].Home != a.Home {
				c.rehomed++
			}
		}
	}
	return c
}

// bruteCost is the least cost of any end state that satisfies converged,
// found by trying every home (or retirement) for every group. An unborn
// group is never homed elsewhere: it stays at its active home or waits
// there (only if its home is full without it), a stillborn one whose home
// is not active goes, and a retiring stillborn one may only go back home.
func bruteCost(w *world) cost {
	act := w.active()
	perNode := max(w.perNode, 1)
	n, waiting := map[string]int{}, map[string]int{}
	best := cost{retired: 1 << 30}
	var try func(i int, c cost)
	try = func(i int, c cost) {
		if i == len(w.groups) {
			for _, id := range act {
				if waiting[id] > 0 && n[id] < perNode {
					return // it waits while its home has room: not an end state
				}
				c.added += perNode - n[id]
			}
			if c.less(best) {
				best = c
			}
			return
		}
		g := w.groups[i]
		homes := act
		switch {
		case !g.Retiring && g.stillborn() && w.nodes[g.Home]:
			waiting[g.Home]++
			try(i+1, c)
			waiting[g.Home]--
			homes = []string{g.Home}
		case !g.Retiring && w.orphaned(g):
			try(i+1, c)
			return
		default:
			// Retiring, or staying retiring.
			d := c
			if !g.Retiring {
				d.retired++
			}
			try(i+1, d)
			if g.stillborn() {
				homes = nil
				if w.nodes[g.Home] {
					homes = []string{g.Home}
				}
			}
		}
		for _, id := range homes {
			if n[id] == perNode {
				continue
			}
			d := c
			if id != g.Home {
				d.rehomed++
			}
			n[id]++
			try(i+1, d)
			n[id]--
		}
	}
	try(0, cost{})
	return best
}

// check asserts what must hold of every plan on w.
func (w *world) check(rng *rand.Rand, acts []GroupAction) {
	t := w.t
	t.Helper()
	if len(w.active()) == 0 {
		if acts != nil {
			t.Fatalf("no active member, plan %v", acts)
		}
		return
	}
	// Deterministic whatever the input order.
	ms, gs := w.members(), slices.Clone(w.groups)
	rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	rng.Shuffle(len(gs), func(i, j int) { gs[i], gs[j] = gs[j], gs[i] })
	if got := PlanGroups(ms, gs, w.perNode); !reflect.DeepEqual(got, acts) {
		t.Fatalf("shuffled input: %v, sorted: %v", got, acts)
	}
	// Never grows and shrinks at once (but for removing stillborn groups,
	// which no other member may take); names each group once, but for a group
	// retired and then removed. Never homes an unborn group elsewhere,
	// unless it owns slots and its home is not active.
	named := map[GroupID]GroupActionKind{}
	kinds := map[GroupActionKind]bool{}
	for _, a := range acts {
		if a.Kind == Add {
			kinds[a.Kind] = true
			continue
		}
		g := w.groups[w.find(a.Group)]
		if a.Kind == Rehome && g.stillborn() && a.Home != g.Home {
			t.Fatalf("unborn group %+v homed at %s: %v", g, a.Home, acts)
		}
		if a.Kind != Remove || !g.stillborn() {
			kinds[a.Kind] = true
		}
		if k, ok := named[a.Group]; ok && (k != Retire || a.Kind != Remove) {
			t.Fatalf("group %d named twice: %v", a.Group, acts)
		}
		named[a.Group] = a.Kind
	}
	if kinds[Add] && (kinds[Retire] || kinds[Remove]) {
		t.Fatalf("plan both grows and shrinks: %v; groups %+v members %v", acts, w.groups, w.members())
	}
	// Stable under its own prefix: the meta leader applies acts[0] and
	// plans again.
	c := w.clone()
	for i, a := range acts {
		c.apply(a)
		if got, want := c.plan(), acts[i+1:]; !slices.Equal(got, want) {
			t.Fatalf("after %v of %v: plan %v, want %v; groups %+v members %v perNode %d", a, acts, got, acts[i+1:], w.groups, w.members(), w.perNode)
		}
	}
	// As cheap as the cheapest end state, where that is small enough to
	// find by trying.
	combos := 1
	for range w.groups {
		combos *= len(w.active()) + 1
		if combos > 50000 {
			return
		}
	}
	if got, best := planCost(w, acts), bruteCost(w); got != best {
		t.Fatalf("plan %v costs %+v, the best %+v; groups %+v, members %v", acts, got, best, w.groups, w.members())
	}
}

// TestPlanGroupsConverges drives random member changes (joins, leaves,
// deaths, returns, removals from the member list, perNode changes) with
// slots draining out of retiring groups at random, applying every plan as
// the meta leader would. Every plan is deterministic, stable under its
// own prefix and as cheap as the brute-force best; one round of it
// converges (perNode non-retiring groups per active member, none homed
// elsewhere); a second round only removes; once retiring groups are
// emptied, one more round of removals leaves nothing to do.
func TestPlanGroupsConverges(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 3))
		w := &world{t: t, nodes: map[string]bool{}, perNode: 1 + rng.IntN(2)}
		nodes := 0
		pick := func(active bool) (string, bool) {
			var ids []string
			for _, m := range w.members() {
				if m.Active == active {
					ids = append(ids, m.ID)
				}
			}
			if len(ids) == 0 {
				return "", false
			}
			return ids[rng.IntN(len(ids))], true
		}
		for step := range 30 {
			for range 1 + rng.IntN(3) {
				switch r := rng.IntN(12); {
				case r < 3:
					w.nodes[fmt.Sprintf("n%d", nodes)] = true // joins
					nodes++
				case r < 6:
					if id, ok := pick(true); ok {
						w.nodes[id] = false // leaves or dies
					}
				case r < 8:
					if id, ok := pick(false); ok {
						w.nodes[id] = true // comes back
					}
				case r < 10:
					if id, ok := pick(false); ok {
						delete(w.nodes, id) // removed from the member list
					}
				default:
					w.perNode = rng.IntN(4) // 0 counts as 1
				}
			}
			// Slots move meanwhile: target groups own some, retiring ones
			// drain, moves come and go.
			// Groups report their first leader; an unborn group owns
			// nothing and no move names it, but for the rare first groups
			// of a cluster.
			for i := range w.groups {
				g := &w.groups[i]
				if g.Unborn && rng.IntN(2) == 0 {
					g.Unborn = false
				}
				switch {
				case g.Retiring:
					g.Owns = rng.IntN(g.Owns + 1)
				case g.Unborn && rng.IntN(10) > 0:
					g.Owns = 0
				default:
					g.Owns = rng.IntN(8)
				}
				g.Busy = rng.IntN(3) == 0 && (!g.Unborn || g.Owns > 0)
			}

			acts := w.plan()
			w.check(rng, acts)
			for _, a := range acts {
				w.apply(a)
			}
			if len(w.active()) == 0 {
				continue
			}
			if why := w.converged(); why != "" {
				t.Fatalf("seed %d step %d: after %v: %s", seed, step, acts, why)
			}
			again := w.plan()
			w.check(rng, again)
			for _, a := range again {
				if a.Kind != Remove {
					t.Fatalf("seed %d step %d: second round %v after %v", seed, step, again, acts)
				}
				w.apply(a)
			}
			// Retiring groups emptied: removals, then nothing.
			c := w.clone()
			retiring := 0
			for i := range c.groups {
				if c.groups[i].Retiring {
					c.groups[i].Owns, c.groups[i].Busy = 0, false
					retiring++
				}
			}
			last := c.plan()
			c.check(rng, last)
			if len(last) != retiring {
				t.Fatalf("seed %d step %d: %d retiring groups emptied, plan %v", seed, step, retiring, last)
			}
			for _, a := range last {
				c.apply(a)
			}
			if got := c.plan(); got != nil {
				t.Fatalf("seed %d step %d: converged and emptied, still %v", seed, step, got)
			}
			if got := len(Target(c.groups, c.members())); got != len(c.groups) {
				t.Fatalf("seed %d step %d: %d targets of %d groups", seed, step, got, len(c.groups))
			}
			if rng.IntN(2) == 0 {
				w.groups = c.groups // drained; otherwise they keep draining
			}
		}
	}
}
