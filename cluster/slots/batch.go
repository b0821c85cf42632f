package slots

// Limits bound how much moves at once, counting the slots of moves already
// in flight. A zero field takes its default (DefaultLimits).
type Limits struct {
	// PerMove is the most slots one move carries: one freeze, one export
	// and one import entry, so it bounds the import entry's size.
	PerMove int
	// PerGroup is the most slots moving into or out of one group at once.
	PerGroup int
	// PerNode is the most slots moving into or out of the groups a node is
	// home to (their leaders freeze, export and import) at once.
	PerNode int
	// Total is the most slots moving in the whole cluster at once.
	Total int
}

// DefaultLimits moves at most 256 slots at once, 64 per group and per node,
// in moves of at most 64 slots: with 4096 slots, the fourth node's group
// receives its 1024 slots in 16 rounds, each a freeze, a flip and an import,
// while every other group keeps serving all but its 64 moving slots.
var DefaultLimits = Limits{PerMove: 64, PerGroup: 64, PerNode: 64, Total: 256}

func (l Limits) withDefaults() Limits {
	if l.PerMove <= 0 {
		l.PerMove = DefaultLimits.PerMove
	}
	if l.PerGroup <= 0 {
		l.PerGroup = DefaultLimits.PerGroup
	}
	if l.PerNode <= 0 {
		l.PerNode = DefaultLimits.PerNode
	}
	if l.Total <= 0 {
		l.Total = DefaultLimits.Total
	}
	return l
}

// budget tracks what limits leave, by group and by home node.
type budget struct {
	lim     Limits
	total   int
	group   map[GroupID]int
	node    map[string]int
	home    map[GroupID]string
	ready   map[GroupID]bool
	present map[GroupID]bool
}

func newBudget(c Cluster, lim Limits) *budget {
	b := &budget{
		lim: lim, group: map[GroupID]int{}, node: map[string]int{},
		home: map[GroupID]string{}, ready: map[GroupID]bool{}, present: map[GroupID]bool{},
	}
	for _, g := range c.Groups {
		b.home[g.ID], b.ready[g.ID], b.present[g.ID] = g.Home, g.Ready, true
	}
	for _, m := range c.InFlight {
		b.take(m.From, m.To, len(m.Slots))
	}
	return b
}

// room is how many slots may move from one group to another now.
func (b *budget) room(from, to GroupID) int {
	if !b.ready[from] || !b.ready[to] {
		return 0
	}
	n := min(b.lim.PerMove, b.lim.Total-b.total, b.lim.PerGroup-b.group[from], b.lim.PerGroup-b.group[to])
	n = min(n, b.lim.PerNode-b.node[b.home[from]])
	if b.home[to] != b.home[from] {
		n = min(n, b.lim.PerNode-b.node[b.home[to]])
	}
	return max(n, 0)
}

func (b *budget) take(from, to GroupID, n int) {
	b.total += n
	b.group[from] += n
	b.group[to] += n
	b.node[b.home[from]] += n
	if b.home[to] != b.home[from] {
		b.node[b.home[to]] += n
	}
}

// NextBatch returns the moves of plan (from Plan(c)) to start now: only
// between ready groups, within lim counting c's in-flight moves, each
// carrying at most lim.PerMove slots (a move of plan may be split, or
// started in part, taking its lowest slots first). Moves that drain groups
// outside the target go first, so a leaving node is freed soonest; then
// plan's order. It returns nothing while the limits are used up by moves in
// flight. Deterministic: the same inputs give the same batch.
func NextBatch(c Cluster, plan []Move, lim Limits) []Move {
	lim = lim.withDefaults()
	b := newBudget(c, lim)
	target := make(map[GroupID]bool, len(c.Target))
	for _, id := range c.Target {
		target[id] = true
	}
	var out []Move
	pass := func(drain bool) {
		for _, m := range plan {
			if target[m.From] == drain || !b.present[m.From] || !b.present[m.To] {
				continue
			}
			slots := m.Slots
			for len(slots) > 0 {
				n := min(b.room(m.From, m.To), len(slots))
				if n == 0 {
					break
				}
				out = append(out, Move{From: m.From, To: m.To, Slots: append([]int(nil), slots[:n]...)})
				b.take(m.From, m.To, n)
				slots = slots[n:]
			}
		}
	}
	pass(true)
	pass(false)
	return out
}
