package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

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
	// cmdReset forgets every state of a key under a policy.
	cmdReset byte = 3
	// cmdHits carries fast-mode decisions the leader already answered:
	// each with its time and outcome, replayed exactly.
	cmdHits byte = 4
)

// Body versions: the first byte of the body of cmdAllow, cmdHits and
// cmdReset (cmdTick has none). A binary applies every version up to its
// own and stops at a newer one (doc.go).
const (
	// allowVersion is the newest body of cmdAllow. Version 2 adds the
	// checkJoined flag (atomic sets); a batch without a set is written as
	// version 1, which older binaries read too.
	allowVersion = 2
	// resetVersion versions the body of cmdReset.
	resetVersion = 1
	// hitsVersion is the newest body of cmdHits. Version 2 adds the
	// hitElastic bit to the outcome byte; version 1 bodies, whose outcome
	// bytes never have it, still decode. A batch without an elastic hit is
	// written as version 1, which older binaries read too.
	hitsVersion = 2
)

// hitElastic is the bit of a version 2 hit's outcome byte carrying
// Hit.Elastic; outcomes are below it.
const hitElastic = 0x80

// Check is one request as a shard log entry carries it: a key, the policy
// to apply (self-contained, so applying needs nothing outside the entry)
// and the cost.
type Check struct {
	Key    string
	Policy *policy.Policy
	Cost   int64
	// Elastic is the leader's judgment, when it wrote the entry, that the
	// policy's cluster-wide rate leaves room to stretch (elastic policies).
	Elastic bool
	// Joined puts the check in one atomic set with the check before it:
	// a set is admitted and counted all or nothing. Every check of a set
	// has the same Policy (the same pointer); a set starts with a check
	// that is not Joined (ValidateSets).
	Joined bool
}

// Hit is a fast-mode decision to replay: what the leader counted, when,
// and whether it stretched the limits doing so.
type Hit struct {
	Key     string
	Policy  *policy.Policy
	Cost    int64
	Time    int64
	Outcome policy.Outcome
	// Elastic is the leader's judgment of room the decision was made with
	// (Check.Elastic): an elastic policy counts stretched with it, so the
	// replay must too.
	Elastic bool
}

// Flag bits of a check: Elastic, and (version 2) Joined.
const (
	checkElastic = 1
	checkJoined  = 2
)

// EncodeAllow appends a cmdAllow entry for checks, stamped with ts (Unix
// ns, the leader's clock). Policies shared by several checks (the same
// pointer, or equal ones) are written once.
func EncodeAllow(dst []byte, ts int64, checks []Check) []byte {
	dst = append(dst, cmdAllow, bodyVersion(len(checks), allowVersion, func(i int) bool { return checks[i].Joined }))
	dst = binary.AppendVarint(dst, ts)
	dst, idx := appendPolicies(dst, len(checks), func(i int) *policy.Policy { return checks[i].Policy })
	dst = binary.AppendUvarint(dst, uint64(len(checks)))
	for _, c := range checks {
		dst = binary.AppendUvarint(dst, uint64(idx[c.Policy]))
		dst = binary.AppendUvarint(dst, uint64(len(c.Key)))
		dst = append(dst, c.Key...)
		dst = binary.AppendUvarint(dst, uint64(c.Cost))
		var flags byte
		if c.Elastic {
			flags |= checkElastic
		}
		if c.Joined {
			flags |= checkJoined
		}
		dst = append(dst, flags)
	}
	return dst
}

// EncodeHits appends a cmdHits entry stamped with ts.
func EncodeHits(dst []byte, ts int64, hits []Hit) []byte {
	dst = append(dst, cmdHits, bodyVersion(len(hits), hitsVersion, func(i int) bool { return hits[i].Elastic }))
	dst = binary.AppendVarint(dst, ts)
	dst, idx := appendPolicies(dst, len(hits), func(i int) *policy.Policy { return hits[i].Policy })
	dst = binary.AppendUvarint(dst, uint64(len(hits)))
	for _, h := range hits {
		dst = binary.AppendUvarint(dst, uint64(idx[h.Policy]))
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = binary.AppendUvarint(dst, uint64(h.Cost))
		dst = binary.AppendVarint(dst, h.Time)
		outcome := byte(h.Outcome)
		if h.Elastic {
			outcome |= hitElastic
		}
		dst = append(dst, outcome)
	}
	return dst
}

// EncodeReset returns a cmdReset entry forgetting key under p.
func EncodeReset(ts int64, key string, p *policy.Policy) []byte {
	dst := append([]byte{cmdReset, resetVersion}, binary.AppendVarint(nil, ts)...)
	dst = p.AppendBinary(dst)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// bodyVersion is the version an entry of n items is written with: newest
// when an item uses what only newest has (needs), else 1, which older
// binaries read too.
func bodyVersion(n int, newest byte, needs func(int) bool) byte {
	for i := range n {
		if needs(i) {
			return newest
		}
	}
	return 1
}

// appendPolicies writes the distinct policies of n items and returns where
// each went. Equal policies behind different pointers (the inline limits of
// separate callers, gathered into one entry) are written once too: every
// replica decodes and validates each policy of every entry it applies.
// Entries are encoded on the Allow path, so the common cases allocate
// nothing beyond idx: one policy behind one pointer, or equal copies of it
// (compared with the first); a map of encodings only past that.
func appendPolicies(dst []byte, n int, at func(int) *policy.Policy) ([]byte, map[*policy.Policy]int) {
	idx := make(map[*policy.Policy]int, 4)
	countAt := len(dst)
	dst = append(dst, 0) // the count's place: one byte below 128, set below
	var first []byte     // the first encoding, within dst
	var byEnc map[string]int
	count := 0
	for i := 0; i < n; i++ {
		p := at(i)
		if _, ok := idx[p]; ok {
			continue
		}
		start := len(dst)
		dst = p.AppendBinary(dst)
		enc := dst[start:]
		if count > 0 {
			first = dst[countAt+1 : countAt+1+len(first)] // dst may have moved
			j, ok := 0, bytes.Equal(enc, first)
			if !ok && byEnc != nil {
				j, ok = byEnc[string(enc)]
			}
			if ok {
				idx[p], dst = j, dst[:start]
				continue
			}
			if byEnc == nil {
				byEnc = map[string]int{string(first): 0}
			}
			byEnc[string(enc)] = count
		} else {
			first = enc
		}
		idx[p] = count
		count++
	}
	var c [binary.MaxVarintLen64]byte
	return slices.Replace(dst, countAt, countAt+1, c[:binary.PutUvarint(c[:], uint64(count))]...), idx
}

// EncodeTick returns a cmdTick entry stamped with ts.
func EncodeTick(ts int64) []byte {
	return binary.AppendVarint([]byte{cmdTick}, ts)
}

// reader decodes entry bodies, remembering the first error so call sites
// stay linear. Byte slices it returns alias the entry.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", ErrCorrupt, what, r.off)
	}
}

// newer records that the body holds what only a newer floodgate writes.
func (r *reader) newer(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %w: %s at byte %d", ErrCorrupt, errNewer, what, r.off)
	}
}

func (r *reader) byte(what string) byte {
	if r.err != nil || r.off >= len(r.b) {
		r.fail(what)
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) uvarint(what string, max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 || v > max {
		r.fail(what)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what, uint64(len(r.b)))
	if r.err != nil || n > uint64(len(r.b)-r.off) {
		r.fail(what)
		return nil
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off]
}

// policy decodes one policy and validates it: the leader did, but checking
// again keeps a buggy or foreign entry from breaking the table's invariants
// (two limits sharing a state), identically on every replica.
func (r *reader) policy() policy.Policy {
	if r.err != nil {
		return policy.Policy{}
	}
	p, n, err := policy.Decode(r.b[r.off:])
	if err == nil {
		err = p.Validate(window.MaxLogLength)
	}
	if err != nil {
		r.err = fmt.Errorf("%w: policy: %w", ErrCorrupt, err)
		return policy.Policy{}
	}
	r.off += n
	return p
}

// version reads a body version, 1 to newest. apply has stopped the node
// on a newer one already; here it is only ever a corrupt body.
func (r *reader) version(newest byte) byte {
	v := r.byte("version")
	if (v < 1 || v > newest) && r.err == nil {
		r.fail("version")
	}
	return v
}

// header reads what every batch body starts with: version, time, and the
// table of policies its items refer to.
func (r *reader) header(newest byte) (version byte, ts int64, pols []policy.Policy) {
	version = r.version(newest)
	ts = r.varint("timestamp")
	pols = make([]policy.Policy, r.uvarint("policy count", uint64(len(r.b))))
	for i := range pols {
		pols[i] = r.policy()
	}
	return version, ts, pols
}

func (r *reader) end() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("trailing bytes")
	}
	return r.err
}

// allowEntry is a decoded cmdAllow body.
type allowEntry struct {
	ts       int64
	policies []policy.Policy
	checks   []entryCheck
}

type entryCheck struct {
	policy  int
	key     []byte
	cost    int64
	elastic bool
	joined  bool
}

func decodeAllow(b []byte) (allowEntry, error) {
	r := reader{b: b}
	var e allowEntry
	version, ts, pols := r.header(allowVersion)
	e.ts, e.policies = ts, pols
	e.checks = make([]entryCheck, r.uvarint("check count", uint64(len(b))))
	for i := range e.checks {
		c := &e.checks[i]
		c.policy = int(r.uvarint("check policy", uint64(max(len(e.policies)-1, 0))))
		c.key = r.bytes("check key")
		c.cost = int64(r.uvarint("check cost", uint64(window.MaxLimit)))
		flags := r.byte("check flags")
		if flags&^(checkElastic|checkJoined) != 0 {
			r.newer("check flags") // a flag this binary would drop
		}
		c.elastic = flags&checkElastic != 0
		c.joined = version >= 2 && flags&checkJoined != 0
		if c.joined && (i == 0 || e.checks[i-1].policy != c.policy) {
			r.fail("a set's checks under different policies")
		}
	}
	if len(e.policies) == 0 && len(e.checks) > 0 {
		r.fail("checks without policies")
	}
	return e, r.end()
}

// hitsEntry is a decoded cmdHits body.
type hitsEntry struct {
	ts       int64
	policies []policy.Policy
	hits     []entryHit
}

type entryHit struct {
	policy  int
	key     []byte
	cost    int64
	time    int64
	outcome policy.Outcome
	elastic bool
}

func decodeHits(b []byte) (hitsEntry, error) {
	r := reader{b: b}
	var e hitsEntry
	version, ts, pols := r.header(hitsVersion)
	e.ts, e.policies = ts, pols
	e.hits = make([]entryHit, r.uvarint("hit count", uint64(len(b))))
	for i := range e.hits {
		h := &e.hits[i]
		h.policy = int(r.uvarint("hit policy", uint64(max(len(e.policies)-1, 0))))
		h.key = r.bytes("hit key")
		h.cost = int64(r.uvarint("hit cost", uint64(window.MaxLimit)))
		h.time = r.varint("hit time")
		b := r.byte("hit outcome")
		if version >= 2 {
			h.elastic, b = b&hitElastic != 0, b&^hitElastic
		}
		if h.outcome = policy.Outcome(b); h.outcome > policy.DeniedCountedReduced {
			r.newer("hit outcome") // outcomes are only ever added
		}
	}
	if len(e.policies) == 0 && len(e.hits) > 0 {
		r.fail("hits without policies")
	}
	return e, r.end()
}

// decodeReset decodes a cmdReset body.
func decodeReset(b []byte) (ts int64, p policy.Policy, key []byte, err error) {
	r := reader{b: b}
	r.version(allowVersion)
	ts = r.varint("timestamp")
	p = r.policy()
	key = r.bytes("key")
	return ts, p, key, r.end()
}

// decodeTick decodes a cmdTick body.
func decodeTick(b []byte) (int64, error) {
	r := reader{b: b}
	ts := r.varint("tick timestamp")
	return ts, r.end()
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

// shapeOf recovers, without allocating, the state-shaping fields of the
// limit an identity belongs to (its value is set to the largest limit):
// enough to decode, encode and expire its state.
func shapeOf(id string) (window.Limit, bool) {
	off := 0
	for range 2 { // skip the key and the scope
		n, k := uvarintString(id[off:])
		if k <= 0 || n > uint64(len(id)-off-k) {
			return window.Limit{}, false
		}
		off += k + int(n)
	}
	if len(id)-off < 2 {
		return window.Limit{}, false
	}
	l := window.Limit{Algorithm: window.Algorithm(id[off]), Calendar: window.Unit(id[off+1]), Limit: window.MaxLimit}
	off += 2
	w, k1 := uvarintString(id[off:])
	if k1 <= 0 {
		return window.Limit{}, false
	}
	bk, k2 := uvarintString(id[off+k1:])
	if k2 <= 0 || off+k1+k2 != len(id) {
		return window.Limit{}, false
	}
	l.Window, l.Buckets = int64(w), int32(bk)
	return l, true
}

// uvarintString is binary.Uvarint over a string.
func uvarintString(s string) (uint64, int) {
	var x uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		b := s[i]
		if b < 0x80 {
			return x | uint64(b)<<(7*i), i + 1
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
	return 0, 0
}
