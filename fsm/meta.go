package fsm

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/window"
)

// Meta command types: the first byte of every meta log entry, followed by
// the command's protobuf encoding. Stored in Raft logs: never renumber.
const (
	MetaInitCluster  byte = 1
	MetaUpsertNode   byte = 2
	MetaSetNodeState byte = 3
	MetaRemoveNode   byte = 4
	MetaShardReport  byte = 5
	MetaSetPolicies  byte = 6
	MetaDeletePolicy byte = 7
)

// MetaView is an immutable copy of the meta state. Readers get the latest
// one without locking; every applied change publishes a new view.
type MetaView struct {
	ClusterID string
	Shards    int
	Replicas  int
	// Nodes are sorted by id. Never modify them.
	Nodes []*metav1.Node
	// Reports holds each shard's latest leadership report (nil if none),
	// indexed by shard. Never modify them.
	Reports []*metav1.ShardReport
	// Policies holds the named policies. Never modify them.
	Policies map[string]*policy.Policy
	// Index is the Raft index of the latest applied command.
	Index uint64

	// A cluster of slots (metaslots.go); all zero in a legacy cluster.
	// SlotCount is how many slots keys hash to (Shards says the same);
	// Table gives each slot's group; Groups (sorted by id) every group;
	// Reports is then indexed by group id, up to NextGroup. Never modify.
	SlotCount     int
	GroupsPerNode int
	Groups        []GroupInfo
	NextGroup     uint32
	Table         []uint32
	// Epoch grows on every change of Table.
	Epoch uint64
	// Moves are the moves in flight, by id; ids below NextMove that are
	// not in Moves are done.
	Moves    []SlotMove
	NextMove uint64

	// MaxLogLength is the least --max-log-length its members reported (0
	// if none did: releases before it): a stored policy must fit every
	// member's, whose groups may hold its keys. Set by publish.
	MaxLogLength int64
	// MaxLogLengthOf is the member whose cap MaxLogLength is (the first
	// in member order of those with it), so that a refusal can name it.
	MaxLogLengthOf string
}

// CheckReplace says why policy p may not replace old, the stored policy
// of its name (nil: none), or returns nil. The error names the field
// ("colocate: ..."). Colocation decides where a key is counted: a change
// would restart every count of the policy.
func CheckReplace(old, p *policy.Policy) error {
	if old != nil && old.Colocate != p.Colocate {
		return fmt.Errorf("colocate: policy %s exists with colocate %v, and changing it would restart its counts: delete the policy and create it again",
			p.Name, old.Colocate)
	}
	return nil
}

// Policy returns the named policy, or nil.
func (v *MetaView) Policy(name string) *policy.Policy { return v.Policies[name] }

// Node returns the node with id, or nil.
func (v *MetaView) Node(id string) *metav1.Node {
	i, ok := slices.BinarySearchFunc(v.Nodes, id, func(n *metav1.Node, id string) int {
		return strings.Compare(n.Id, id)
	})
	if !ok {
		return nil
	}
	return v.Nodes[i]
}

// CheckSetPolicy reports why the state would refuse p as policies[i] of a
// SetPolicies command (ErrRefused): a change of colocate, which decides
// where a key is counted, so would restart every count of the policy. The
// Admin API's dry run asks it too, to refuse what a write would.
func (v *MetaView) CheckSetPolicy(i int, p *policy.Policy) error {
	if err := CheckReplace(v.Policies[p.Name], p); err != nil {
		return fmt.Errorf("%w: policies[%d].%w", ErrRefused, i, err)
	}
	return nil
}

// Initialized reports whether the cluster has been created.
func (v *MetaView) Initialized() bool { return v.ClusterID != "" }

// Meta is the state machine of the meta Raft group: cluster identity,
// membership and the shards' leadership reports.
type Meta struct {
	mu      sync.Mutex // serializes writers; readers use view
	view    atomic.Pointer[MetaView]
	changed chan struct{}
	// seen is the index of the latest command applied or refused. Raft's
	// own applied index moves when an entry is handed to the state
	// machine, before it is applied: a reader must wait on this one.
	seen atomic.Uint64
}

// Seen returns the Raft index of the latest command the state has applied
// or refused: once it reaches a command's index, the view shows it.
func (m *Meta) Seen() uint64 { return m.seen.Load() }

// NewMeta returns an empty meta state machine.
func NewMeta() *Meta {
	m := &Meta{changed: make(chan struct{})}
	m.view.Store(&MetaView{})
	return m
}

// View returns the current state. It never blocks.
func (m *Meta) View() *MetaView { return m.view.Load() }

// Changed returns a channel closed at the next change of state.
func (m *Meta) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// publish installs v and wakes everyone waiting for a change.
func (m *Meta) publish(v *MetaView) {
	v.MaxLogLength, v.MaxLogLengthOf = 0, ""
	for _, n := range v.Nodes {
		if l := n.GetMaxLogLength(); l > 0 && (v.MaxLogLength == 0 || l < v.MaxLogLength) {
			v.MaxLogLength, v.MaxLogLengthOf = l, n.GetId()
		}
	}
	m.view.Store(v)
	close(m.changed)
	m.changed = make(chan struct{})
}

// EncodeMeta encodes a meta command for the log.
func EncodeMeta(typ byte, msg proto.Message) ([]byte, error) {
	b, err := proto.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return append([]byte{typ}, b...), nil
}

// Apply implements raft.FSM. It returns nil, or an error describing why the
// command was refused (identically on every replica). It panics, stopping
// the node, on an unknown command type (ErrUnknownEntry; doc.go says why).
func (m *Meta) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if typ := l.Data[0]; typ < MetaInitCluster || typ > metaLast {
		stop("meta", l.Index, typ, 0, 0)
	}
	defer m.seen.Store(l.Index) // after the view is published
	cur := m.view.Load()
	next, err := applyMeta(cur, l.Data[0], l.Data[1:])
	if err != nil && newerFormat(err) {
		stopNewer("meta", l.Index, l.Data[0], err)
	}
	if err != nil {
		return err
	}
	next.Index = l.Index
	m.publish(next)
	return nil
}

// applyMeta returns the state after one command; cur is never modified.
func applyMeta(cur *MetaView, typ byte, body []byte) (*MetaView, error) {
	next := *cur
	switch typ {
	case MetaInitCluster:
		var c metav1.InitCluster
		if err := proto.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if cur.Initialized() {
			if cur.ClusterID == c.ClusterId {
				return &next, nil
			}
			return nil, fmt.Errorf("%w: cluster %s already created", ErrRefused, cur.ClusterID)
		}
		if c.Slots > 0 {
			if c.ClusterId == "" || c.Replicas == 0 {
				return nil, fmt.Errorf("%w: cluster id and replicas are required", ErrRefused)
			}
			next.ClusterID, next.Replicas = c.ClusterId, int(c.Replicas)
			if err := initSlots(&next, &c); err != nil {
				return nil, err
			}
			return &next, nil
		}
		if c.ClusterId == "" || c.Shards == 0 || c.Replicas == 0 {
			return nil, fmt.Errorf("%w: cluster id, shards and replicas are required", ErrRefused)
		}
		if c.Shards > maxShards {
			return nil, fmt.Errorf("%w: %d shards, at most %d", ErrRefused, c.Shards, maxShards)
		}
		next.ClusterID, next.Shards, next.Replicas = c.ClusterId, int(c.Shards), int(c.Replicas)
		next.Reports = make([]*metav1.ShardReport, c.Shards)
	case MetaUpsertNode:
		var c metav1.UpsertNode
		if err := proto.Unmarshal(body, &c); err != nil || c.Node == nil || c.Node.Id == "" {
			return nil, fmt.Errorf("%w: upsert node", ErrCorrupt)
		}
		n := proto.Clone(c.Node).(*metav1.Node)
		if old := cur.Node(n.Id); old != nil && n.State == metav1.NodeState_NODE_STATE_UNSPECIFIED {
			n.State = old.State
		}
		if n.State == metav1.NodeState_NODE_STATE_UNSPECIFIED {
			n.State = metav1.NodeState_NODE_STATE_ACTIVE
		}
		next.Nodes = withNode(cur.Nodes, n)
	case MetaSetNodeState:
		var c metav1.SetNodeState
		if err := proto.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		old := cur.Node(c.Id)
		if old == nil {
			return nil, fmt.Errorf("%w: node %q", ErrUnknownNode, c.Id)
		}
		if c.State < metav1.NodeState_NODE_STATE_ACTIVE || c.State > metav1.NodeState_NODE_STATE_DEAD {
			// A node neither active, leaving nor dead would be placed by
			// no rule: refuse it, identically on every replica.
			return nil, fmt.Errorf("%w: state: unknown node state %d", ErrRefused, c.State)
		}
		if c.State == metav1.NodeState_NODE_STATE_LEAVING && old.State == metav1.NodeState_NODE_STATE_ACTIVE && activeOthers(cur, c.Id) == 0 {
			// Checked here, in log order, so two leaves at once cannot
			// both pass: nothing could take the last node's replicas.
			return nil, fmt.Errorf("%w: %s is the last active node; nothing could take its replicas", ErrRefused, c.Id)
		}
		n := proto.Clone(old).(*metav1.Node)
		n.State = c.State
		next.Nodes = withNode(cur.Nodes, n)
	case MetaRemoveNode:
		var c metav1.RemoveNode
		if err := proto.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		next.Nodes = slices.DeleteFunc(slices.Clone(cur.Nodes), func(n *metav1.Node) bool { return n.Id == c.Id })
	case MetaSetPolicies:
		var c metav1.SetPolicies
		if err := proto.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		next.Policies = maps.Clone(cur.Policies)
		if next.Policies == nil {
			next.Policies = map[string]*policy.Policy{}
		}
		for i, b := range c.Policies {
			p, err := decodeStoredPolicy(b)
			if err != nil {
				return nil, fmt.Errorf("%w: policies[%d]: %w", ErrRefused, i, err)
			}
			if err := cur.CheckSetPolicy(i, p); err != nil {
				return nil, err
			}
			next.Policies[p.Name] = p
		}
	case MetaDeletePolicy:
		var c metav1.DeletePolicy
		if err := proto.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		// Deleting a missing policy is a no-op, so a retried delete
		// succeeds; the API tells unknown names apart before writing.
		next.Policies = maps.Clone(cur.Policies)
		delete(next.Policies, c.Name)
	case MetaShardReport:
		var c metav1.ShardReport
		if err := proto.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if int(c.Shard) >= len(cur.Reports) || (cur.Slotted() && cur.Group(c.Shard) == nil) {
			return nil, fmt.Errorf("%w: shard: no group or shard %d", ErrRefused, c.Shard)
		}
		if old := cur.Reports[c.Shard]; old != nil && c.Term < old.Term {
			return &next, nil // stale: a newer leader already reported
		}
		next.Reports = slices.Clone(cur.Reports)
		next.Reports[c.Shard] = &c
	case MetaAddGroup, MetaRehomeGroup, MetaRetireGroup, MetaRemoveGroup, MetaPlanMoves, MetaMoveFrozen, MetaMoveImported:
		if err := applySlots(cur, &next, typ, body); err != nil {
			return nil, err
		}
	default:
		// Meta.Apply stops the node before it gets here.
		return nil, fmt.Errorf("%w: unknown meta command type %d", ErrCorrupt, typ)
	}
	return &next, nil
}

// activeOthers counts the active nodes other than id.
func activeOthers(v *MetaView, id string) int {
	n := 0
	for _, m := range v.Nodes {
		if m.Id != id && m.State == metav1.NodeState_NODE_STATE_ACTIVE {
			n++
		}
	}
	return n
}

// withNode returns nodes with n added or replacing the node of the same id,
// sorted by id. nodes is not modified.
func withNode(nodes []*metav1.Node, n *metav1.Node) []*metav1.Node {
	out := make([]*metav1.Node, 0, len(nodes)+1)
	for _, o := range nodes {
		if o.Id != n.Id {
			out = append(out, o)
		}
	}
	out = append(out, n)
	slices.SortFunc(out, func(a, b *metav1.Node) int { return strings.Compare(a.Id, b.Id) })
	return out
}

// decodeStoredPolicy decodes and checks a named policy: the API validated
// it, and checking again keeps the stored state sound, on every replica
// alike.
func decodeStoredPolicy(b []byte) (*policy.Policy, error) {
	p, n, err := policy.Decode(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%w: trailing bytes", policy.ErrCorrupt)
	}
	if err == nil {
		err = p.Validate(window.MaxLogLength)
	}
	if err == nil && p.Name == "" {
		err = fmt.Errorf("%w: a stored policy needs a name", ErrRefused)
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// maxShards bounds the shard count a cluster can be created with (far
// above cluster.MaxShards): the meta state holds a report slot per shard,
// so an entry or snapshot of a few bytes must not make it allocate more.
const maxShards = 1 << 16

// metaVersion is the first byte of a meta snapshot; the rest is a
// deterministic protobuf encoding of metav1.State. Version 2 adds the
// slot fields; a legacy cluster still writes version 1, which binaries
// that predate slots read.
const (
	metaVersion       = 2
	metaVersionLegacy = 1
)

// Snapshot implements raft.FSM.
func (m *Meta) Snapshot() (raft.FSMSnapshot, error) {
	v := m.View()
	st := &metav1.State{ClusterId: v.ClusterID, Shards: uint32(v.Shards), Replicas: uint32(v.Replicas), Nodes: v.Nodes,
		AppliedIndex: m.seen.Load()}
	for _, name := range slices.Sorted(maps.Keys(v.Policies)) {
		st.Policies = append(st.Policies, v.Policies[name].AppendBinary(nil))
	}
	for _, r := range v.Reports {
		if r != nil {
			st.ShardReports = append(st.ShardReports, r)
		}
	}
	snapshotSlots(v, st)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(st)
	if err != nil {
		return nil, err
	}
	version := byte(metaVersionLegacy)
	if v.Slotted() {
		version = metaVersion
	}
	return metaSnapshot(append([]byte{version}, b...)), nil
}

// Restore implements raft.FSM.
func (m *Meta) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b) == 0 || (b[0] != metaVersion && b[0] != metaVersionLegacy) {
		return fmt.Errorf("%w: meta snapshot", ErrSnapshotVersion)
	}
	var st metav1.State
	if err := proto.Unmarshal(b[1:], &st); err != nil {
		return fmt.Errorf("%w: meta snapshot: %w", ErrCorrupt, err)
	}
	if st.Shards > maxShards {
		return fmt.Errorf("%w: meta snapshot: %d shards, at most %d", ErrCorrupt, st.Shards, maxShards)
	}
	v := &MetaView{ClusterID: st.ClusterId, Shards: int(st.Shards), Replicas: int(st.Replicas), Nodes: st.Nodes}
	slices.SortFunc(v.Nodes, func(a, b *metav1.Node) int { return strings.Compare(a.Id, b.Id) })
	v.Reports = make([]*metav1.ShardReport, st.Shards)
	if err := restoreSlots(&st, v); err != nil {
		return err
	}
	for _, r := range st.ShardReports {
		if int(r.Shard) < len(v.Reports) {
			v.Reports[r.Shard] = r
		}
	}
	v.Policies = map[string]*policy.Policy{}
	for i, b := range st.Policies {
		p, err := decodeStoredPolicy(b)
		if err != nil && newerFormat(err) {
			return fmt.Errorf("%w: meta snapshot policy %d: %w", ErrSnapshotVersion, i, err)
		}
		if err != nil {
			return fmt.Errorf("%w: meta snapshot policy %d: %w", ErrCorrupt, i, err)
		}
		v.Policies[p.Name] = p
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.publish(v)
	m.seen.Store(st.AppliedIndex)
	return nil
}

type metaSnapshot []byte

func (s metaSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s metaSnapshot) Release() {}
