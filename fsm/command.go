package fsm

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// Shard log entry types: the first byte of every entry. Stored in Raft
// logs: never renumber.
const (
	// cmdAllow carries a batch of checks and the leader's timestamp.
	cmdAllow byte = 1
	// cmdTick carries only a timestamp; it lets an idle shard expire keys.
	cmdTick byte = 2
)

// allowVersion versions the body of cmdAllow.
const allowVersion = 1

// Check is one request as a shard log entry carries it: a key, the policy
// to apply (self-contained, so applying needs nothing outside the entry)
// and the cost.
type Check struct {
	Key    string
	Policy *policy.Policy
	Cost   int64
}

// EncodeAllow appends a cmdAllow entry for checks, stamped with ts (Unix
// ns, the leader's clock). Policies shared by several checks (the same
// pointer) are written once.
func EncodeAllow(dst []byte, ts int64, checks []Check) []byte {
	dst = append(dst, cmdAllow, allowVersion)
	dst = binary.AppendVarint(dst, ts)
	idx := make(map[*policy.Policy]int, 4)
	order := make([]*policy.Policy, 0, 4)
	for _, c := range checks {
		if _, ok := idx[c.Policy]; !ok {
			idx[c.Policy] = len(order)
			order = append(order, c.Policy)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, p := range order {
		dst = p.AppendBinary(dst)
	}
	dst = binary.AppendUvarint(dst, uint64(len(checks)))
	for _, c := range checks {
		dst = binary.AppendUvarint(dst, uint64(idx[c.Policy]))
		dst = binary.AppendUvarint(dst, uint64(len(c.Key)))
		dst = append(dst, c.Key...)
		dst = binary.AppendUvarint(dst, uint64(c.Cost))
	}
	return dst
}

// EncodeTick returns a cmdTick entry stamped with ts.
func EncodeTick(ts int64) []byte {
	return binary.AppendVarint([]byte{cmdTick}, ts)
}

// decodeTick decodes a cmdTick body (after the type byte).
func decodeTick(b []byte) (int64, error) {
	ts, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return 0, fmt.Errorf("%w: tick entry", ErrCorrupt)
	}
	return ts, nil
}

// allowEntry is a decoded cmdAllow body. Keys alias the entry's bytes.
type allowEntry struct {
	ts       int64
	policies []policy.Policy
	checks   []entryCheck
}

type entryCheck struct {
	policy int
	key    []byte
	cost   int64
}

// decodeAllow decodes a cmdAllow body (after the type byte).
func decodeAllow(b []byte) (allowEntry, error) {
	var e allowEntry
	if len(b) == 0 || b[0] != allowVersion {
		return e, fmt.Errorf("%w: allow entry version", ErrCorrupt)
	}
	off := 1
	ts, n := binary.Varint(b[off:])
	if n <= 0 {
		return e, fmt.Errorf("%w: allow entry timestamp", ErrCorrupt)
	}
	e.ts = ts
	off += n
	np, n := binary.Uvarint(b[off:])
	if n <= 0 || np > uint64(len(b)) {
		return e, fmt.Errorf("%w: allow entry policy count", ErrCorrupt)
	}
	off += n
	e.policies = make([]policy.Policy, np)
	for i := range e.policies {
		p, n, err := policy.Decode(b[off:])
		if err == nil {
			// The leader validated it; checking again keeps a buggy or
			// foreign entry from breaking the table's invariants (two limits
			// sharing one state), identically on every replica.
			err = p.Validate(math.MaxInt64)
		}
		if err != nil {
			return e, fmt.Errorf("%w: policy %d: %w", ErrCorrupt, i, err)
		}
		e.policies[i] = p
		off += n
	}
	nc, n := binary.Uvarint(b[off:])
	if n <= 0 || nc > uint64(len(b)) {
		return e, fmt.Errorf("%w: allow entry check count", ErrCorrupt)
	}
	off += n
	e.checks = make([]entryCheck, nc)
	for i := range e.checks {
		c := &e.checks[i]
		pi, n1 := binary.Uvarint(b[off:])
		if n1 <= 0 || pi >= np {
			return e, fmt.Errorf("%w: check %d policy", ErrCorrupt, i)
		}
		off += n1
		kl, n2 := binary.Uvarint(b[off:])
		if n2 <= 0 || kl > uint64(len(b)-off-n2) {
			return e, fmt.Errorf("%w: check %d key", ErrCorrupt, i)
		}
		off += n2
		c.key = b[off : off+int(kl)]
		off += int(kl)
		cost, n3 := binary.Uvarint(b[off:])
		if n3 <= 0 || cost > uint64(window.MaxLimit) {
			return e, fmt.Errorf("%w: check %d cost", ErrCorrupt, i)
		}
		off += n3
		c.policy = int(pi)
		c.cost = int64(cost)
	}
	return e, nil
}

// appendID appends the state identity of limit l of the policy named scope
// for key. Everything that shapes a State (algorithm, window, calendar,
// buckets) is part of it, so a changed policy never reads a state laid out
// for another; the limit value and burst are not, so raising a limit keeps
// the counts.
func appendID(dst []byte, key []byte, scope string, l *window.Limit) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(scope)))
	dst = append(dst, scope...)
	dst = append(dst, byte(l.Algorithm), byte(l.Calendar))
	dst = binary.AppendUvarint(dst, uint64(l.Window))
	dst = binary.AppendUvarint(dst, uint64(l.Buckets))
	return dst
}

// parseID recovers the key, scope and the state-shaping fields of the limit
// from an identity.
func parseID(id string) (key, scope string, l window.Limit, err error) {
	b := []byte(id)
	off := 0
	field := func() string {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n > uint64(len(b)-off-k) {
			err = fmt.Errorf("%w: state identity", ErrCorrupt)
			return ""
		}
		s := string(b[off+k : off+k+int(n)])
		off += k + int(n)
		return s
	}
	if key = field(); err != nil {
		return
	}
	if scope = field(); err != nil {
		return
	}
	if len(b)-off < 2 {
		err = fmt.Errorf("%w: state identity", ErrCorrupt)
		return
	}
	l.Algorithm, l.Calendar = window.Algorithm(b[off]), window.Unit(b[off+1])
	off += 2
	w, k1 := binary.Uvarint(b[off:])
	if k1 <= 0 {
		err = fmt.Errorf("%w: state identity window", ErrCorrupt)
		return
	}
	off += k1
	bk, k2 := binary.Uvarint(b[off:])
	if k2 <= 0 || off+k2 != len(b) {
		err = fmt.Errorf("%w: state identity buckets", ErrCorrupt)
		return
	}
	l.Window, l.Buckets = int64(w), int32(bk)
	return
}
