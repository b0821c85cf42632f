package slots

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// balanced reports why table is not balanced over target (every target
// group within one slot of every other, nothing elsewhere), or "".
func balanced(table []GroupID, target []GroupID) string {
	n := counts(table)
	lo, hi := len(table), 0
	for _, id := range target {
		lo, hi = min(lo, n[id]), max(hi, n[id])
		delete(n, id)
	}
	if len(target) > 0 && hi-lo > 1 {
		return fmt.Sprintf("target groups own %d to %d slots", lo, hi)
	}
	for id, k := range n {
		return fmt.Sprintf("group %d outside the target owns %d slots", id, k)
	}
	return ""
}

// bruteMoves is the fewest slots any balanced assignment of table's slots
// to target differs from table by, found by trying them all.
func bruteMoves(table []GroupID, target []GroupID) int {
	base, extra := len(table)/len(target), len(table)%len(target)
	cnt := make([]int, len(target))
	best := len(table) + 1
	var try func(s, moved int)
	try = func(s, moved int) {
		if moved >= best {
			return
		}
		if s == len(table) {
			over := 0
			for _, k := range cnt {
				if k < base {
					return
				}
				if k > base {
					over++
				}
			}
			if over == extra {
				best = moved
			}
			return
		}
		for i, id := range target {
			if cnt[i] == base+1 || (cnt[i] == base && extra == 0) {
				continue
			}
			cnt[i]++
			d := 0
			if table[s] != id {
				d = 1
			}
			try(s+1, moved+d)
			cnt[i]--
		}
	}
	try(0, 0)
	return best
}

// TestPlanMinimalAgainstBruteForce checks, on random small clusters, that
// Plan balances and moves exactly as few slots as the best assignment.
func TestPlanMinimalAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		nGroups := 1 + rng.IntN(5)
		var gs []Group
		for i := range nGroups {
			gs = append(gs, Group{ID: GroupID(10 + i), Home: fmt.Sprintf("n%d", rng.IntN(3)), Ready: true})
		}
		tab := make([]GroupID, rng.IntN(9))
		for s := range tab {
			tab[s] = gs[rng.IntN(nGroups)].ID
		}
		var target []GroupID
		for _, g := range gs {
			if rng.IntN(3) > 0 {
				target = append(target, g.ID)
			}
		}
		if len(target) == 0 {
			target = append(target, gs[rng.IntN(nGroups)].ID)
		}
		rng.Shuffle(len(target), func(i, j int) { target[i], target[j] = target[j], target[i] })
		c := Cluster{Table: tab, Groups: gs, Target: target}
		plan, err := Plan(c)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, c, plan)
		after := Apply(tab, plan)
		if why := balanced(after, target); why != "" {
			t.Fatalf("iter %d: %v over %v: after %v: %s", iter, tab, target, after, why)
		}
		if got, want := Slots(plan), bruteMoves(tab, target); got != want {
			t.Fatalf("iter %d: %v over %v: Plan moves %d slots, the best moves %d (%v)", iter, tab, target, got, want, plan)
		}
	}
}

// checkPlan checks that plan's moves are between distinct groups, take
// slots their From owns and that are not in flight, and move each at most
// once.
func checkPlan(t *testing.T, c Cluster, plan []Move) {
	t.Helper()
	own, moving, err := c.owners()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, m := range plan {
		if m.From == m.To || len(m.Slots) == 0 || !slices.IsSorted(m.Slots) {
			t.Fatalf("bad move %v", m)
		}
		for _, s := range m.Slots {
			if seen[s] || moving[s] || own[s] != m.From {
				t.Fatalf("move %v: slot %d (owner %d, in flight %v, twice %v)", m, s, own[s], moving[s], seen[s])
			}
			seen[s] = true
		}
	}
}

// sim is a cluster's slot table driven through joins, leaves and moves
// that start, flip and finish in random order, as the reconcilers would.
type sim struct {
	t       *testing.T
	rng     *rand.Rand
	perNode int
	lim     Limits
	nodes   int
	groups  []Group
	target  []GroupID
	nextID  GroupID
	table   []GroupID
	flight  []Move
	flipped []bool
	moved   int
}

func (s *sim) cluster() Cluster {
	return Cluster{Table: s.table, Groups: s.groups, Target: s.target, InFlight: s.flight}
}

// join adds a node home to perNode new groups, not ready yet.
func (s *sim) join() {
	s.nodes++
	for range s.perNode {
		s.groups = append(s.groups, Group{ID: s.nextID, Home: fmt.Sprintf("n%d", s.nodes)})
		s.target = append(s.target, s.nextID)
		s.nextID++
	}
}

// leave takes a random node's groups out of the target, if another node
// keeps some.
func (s *sim) leave() {
	homes := map[string]bool{}
	for _, id := range s.target {
		homes[s.group(id).Home] = true
	}
	if len(homes) < 2 {
		return
	}
	h := s.group(s.target[s.rng.IntN(len(s.target))]).Home
	s.target = slices.DeleteFunc(s.target, func(id GroupID) bool { return s.group(id).Home == h })
}

func (s *sim) group(id GroupID) *Group {
	for i := range s.groups {
		if s.groups[i].ID == id {
			return &s.groups[i]
		}
	}
	s.t.Fatalf("no group %d", id)
	return nil
}

// removeEmpty deletes groups outside the target that own nothing and no
// move names, as MetaRemoveGroup would.
func (s *sim) removeEmpty() {
	n := counts(s.table)
	s.groups = slices.DeleteFunc(s.groups, func(g Group) bool {
		if slices.Contains(s.target, g.ID) || n[g.ID] > 0 {
			return false
		}
		for _, m := range s.flight {
			if m.From == g.ID || m.To == g.ID {
				return false
			}
		}
		return true
	})
}

// progress flips or finishes one random move in flight.
func (s *sim) progress() {
	if len(s.flight) == 0 {
		return
	}
	i := s.rng.IntN(len(s.flight))
	if !s.flipped[i] {
		s.table = Apply(s.table, s.flight[i:i+1])
		s.flipped[i] = true
		if s.rng.IntN(2) == 0 {
			return
		}
	}
	s.flight = slices.Delete(s.flight, i, i+1)
	s.flipped = slices.Delete(s.flipped, i, i+1)
}

// start plans and starts the next batch, checking both.
func (s *sim) start() {
	c := s.cluster()
	plan, err := Plan(c)
	if err != nil {
		s.t.Fatal(err)
	}
	checkPlan(s.t, c, plan)
	batch := NextBatch(c, plan, s.lim)
	checkPlan(s.t, c, batch)
	s.checkLimits(append(slices.Clone(s.flight), batch...))
	for _, m := range batch {
		if !s.group(m.From).Ready || !s.group(m.To).Ready || len(m.Slots) > s.lim.PerMove {
			s.t.Fatalf("batch move %v: not ready or over PerMove", m)
		}
		s.moved += len(m.Slots)
	}
	s.flight = append(s.flight, batch...)
	s.flipped = append(s.flipped, make([]bool, len(batch))...)
}

func (s *sim) checkLimits(moves []Move) {
	total, group, node := 0, map[GroupID]int{}, map[string]int{}
	for _, m := range moves {
		n := len(m.Slots)
		total += n
		group[m.From] += n
		group[m.To] += n
		node[s.group(m.From).Home] += n
		if s.group(m.To).Home != s.group(m.From).Home {
			node[s.group(m.To).Home] += n
		}
	}
	for _, k := range group {
		if k > s.lim.PerGroup {
			s.t.Fatalf("%d slots moving at one group, limit %d", k, s.lim.PerGroup)
		}
	}
	for _, k := range node {
		if k > s.lim.PerNode {
			s.t.Fatalf("%d slots moving at one node, limit %d", k, s.lim.PerNode)
		}
	}
	if total > s.lim.Total {
		s.t.Fatalf("%d slots moving, limit %d", total, s.lim.Total)
	}
}

// check asserts that every slot has exactly one owner that exists and
// in-flight moves are consistent.
func (s *sim) check() {
	c := s.cluster()
	if _, _, err := c.owners(); err != nil {
		s.t.Fatal(err)
	}
}

// TestHistories drives random clusters through random joins and leaves
// with moves in flight, then lets them settle: at every step each slot has
// one owner; once settled the table is balanced, and a rebalance that runs
// without interruption moves exactly what its first plan said, which is
// the brute-force minimum where that is small enough to compute.
func TestHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 300 {
		slotCounts := []int{1, 2, 5, 7, 8, 16, 64, 4096}
		s := &sim{
			t: t, rng: rng, perNode: 1 + rng.IntN(2),
			lim: Limits{PerMove: 1 + rng.IntN(8), PerGroup: 1 + rng.IntN(16), PerNode: 1 + rng.IntN(16), Total: 1 + rng.IntN(40)},
		}
		n := slotCounts[rng.IntN(len(slotCounts))]
		if rng.IntN(4) == 0 || n > 64 {
			s.lim = DefaultLimits // small limits on 4096 slots take thousands of rounds
		}
		// Bootstrap: the first node's groups own contiguous ranges.
		s.join()
		s.table = make([]GroupID, n)
		for i := range s.table {
			s.table[i] = s.target[i*len(s.target)/n]
		}
		for i := range s.groups {
			s.groups[i].Ready = true
		}
		for range 10 + rng.IntN(40) {
			switch r := rng.IntN(10); {
			case r == 0:
				s.join()
			case r == 1:
				s.leave()
			case r < 4:
				s.groups[rng.IntN(len(s.groups))].Ready = true // a new group's leader reports
			case r < 7:
				s.progress()
			default:
				s.start()
			}
			s.removeEmpty()
			s.check()
		}
		// Settle: everything ready, moves in flight finished, then
		// rebalance uninterrupted.
		for i := range s.groups {
			s.groups[i].Ready = true
		}
		for len(s.flight) > 0 {
			s.progress()
			s.check()
		}
		plan, err := Plan(s.cluster())
		if err != nil {
			t.Fatal(err)
		}
		want := Slots(plan)
		if n <= 8 && len(s.target) <= 5 {
			if best := bruteMoves(s.table, s.target); want != best {
				t.Fatalf("iter %d: plan moves %d slots, the best moves %d", iter, want, best)
			}
		}
		s.moved = 0
		for rounds := 0; ; rounds++ {
			if rounds > n+10 {
				t.Fatalf("iter %d: not settled after %d rounds", iter, rounds)
			}
			s.start()
			if len(s.flight) == 0 {
				break
			}
			for len(s.flight) > 0 {
				s.progress()
				s.check()
			}
			s.removeEmpty()
		}
		if s.moved != want {
			t.Fatalf("iter %d: rebalance moved %d slots, its plan said %d", iter, s.moved, want)
		}
		if why := balanced(s.table, s.target); why != "" {
			t.Fatalf("iter %d: settled but %s", iter, why)
		}
		s.removeEmpty()
		if len(s.groups) != len(s.target) {
			t.Fatalf("iter %d: %d groups left, %d in the target", iter, len(s.groups), len(s.target))
		}
	}
}

// TestJoinLeave4096 pins the movement of a join and a leave at the
// default slot count: the fewest slots possible, and none moved twice.
func TestJoinLeave4096(t *testing.T) {
	tab := make([]GroupID, 4096)
	for i := range tab {
		tab[i] = GroupID(i * 3 / 4096)
	}
	c := Cluster{Table: tab, Groups: groups(0, 1, 2, 3), Target: []GroupID{0, 1, 2, 3}}
	plan, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := Slots(plan); got != 1024 {
		t.Fatalf("join of a 4th group moves %d slots, want 1024", got)
	}
	joined := Apply(tab, plan)
	c = Cluster{Table: joined, Groups: groups(0, 1, 2, 3), Target: []GroupID{0, 2, 3}}
	plan, err = Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := Slots(plan); got != 1024 {
		t.Fatalf("leave of a group moves %d slots, want its 1024", got)
	}
	if why := balanced(Apply(joined, plan), c.Target); why != "" {
		t.Fatal(why)
	}
}
