package policy

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/floodgate/floodgate/window"
)

// codecVersion is the first byte of an encoded policy. Bump it when the
// encoding changes; decoders keep reading every older version, and refuse
// newer ones with ErrNewerVersion (the state machines then stop: ship a
// new version readable one release before it is written).
const codecVersion = 1

// Flags of the encoding.
const (
	flagCountDenied = 1 << 0
	flagReduced     = 1 << 1
	// flagColocate: nodes before it ignore the bit (they would count a
	// colocated policy's keys untagged): upgrade every node before
	// creating a colocated policy.
	flagColocate = 1 << 2
	// knownFlags are the flags this binary reads; another one is a newer
	// release's (ErrNewerVersion), never ignored: its meaning would be
	// lost from every policy this binary encodes again (a meta snapshot).
	knownFlags = flagCountDenied | flagReduced | flagColocate
)

// AppendBinary appends p's encoding, as carried in shard log entries and
// stored in the meta group.
func (p *Policy) AppendBinary(dst []byte) []byte {
	dst = append(dst, codecVersion)
	dst = appendString(dst, p.Name)
	var flags byte
	if p.CountDenied {
		flags |= flagCountDenied
	}
	if p.Reduced != nil {
		flags |= flagReduced
	}
	if p.Colocate {
		flags |= flagColocate
	}
	dst = append(dst, flags, byte(p.Mode), byte(p.Consistency))
	dst = binary.AppendUvarint(dst, uint64(p.SoftPercent))
	dst = binary.AppendUvarint(dst, uint64(p.ElasticCeilingPercent))
	dst = binary.AppendUvarint(dst, uint64(p.ElasticCapacity))
	dst = binary.AppendUvarint(dst, uint64(len(p.KeyBy)))
	for _, k := range p.KeyBy {
		dst = appendString(dst, k)
	}
	dst = binary.AppendUvarint(dst, uint64(len(p.Limits)))
	for i := range p.Limits {
		dst = appendLimit(dst, &p.Limits[i])
	}
	if p.Reduced != nil {
		dst = appendLimit(dst, p.Reduced)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendLimit(dst []byte, l *Limit) []byte {
	dst = appendString(dst, l.Name)
	dst = append(dst, byte(l.Algorithm), byte(l.Calendar))
	dst = binary.AppendUvarint(dst, uint64(l.Limit.Limit))
	dst = binary.AppendUvarint(dst, uint64(l.Window))
	dst = binary.AppendUvarint(dst, uint64(l.Buckets))
	return binary.AppendUvarint(dst, uint64(l.Burst))
}

// Decode reads a policy that AppendBinary encoded and returns the number of
// bytes read. It checks structure only; callers Validate what they accept
// from outside.
func Decode(src []byte) (Policy, int, error) {
	d := decoder{src: src}
	switch v := d.byte(); {
	case v > codecVersion:
		return Policy{}, 0, fmt.Errorf("%w: %w: version %d, this binary reads up to %d", ErrCorrupt, ErrNewerVersion, v, codecVersion)
	case v != codecVersion:
		return Policy{}, 0, fmt.Errorf("%w: unknown version %d", ErrCorrupt, v)
	}
	var p Policy
	p.Name = string(d.bytes())
	flags := d.byte()
	if unknown := flags &^ knownFlags; unknown != 0 && d.err == nil {
		return Policy{}, 0, fmt.Errorf("%w: %w: flags %#x", ErrCorrupt, ErrNewerVersion, unknown)
	}
	p.Mode, p.Consistency = Mode(d.byte()), Consistency(d.byte())
	if d.err == nil && (p.Mode > Elastic || p.Consistency > Fast) {
		// Values are only ever added: one past the last is a newer
		// release's, never ignored (it would be refused by a check's
		// validation while the newer replicas apply it).
		return Policy{}, 0, fmt.Errorf("%w: %w: mode %d, consistency %d", ErrCorrupt, ErrNewerVersion, p.Mode, p.Consistency)
	}
	p.CountDenied = flags&flagCountDenied != 0
	p.Colocate = flags&flagColocate != 0
	p.SoftPercent = int64(d.uvarint())
	p.ElasticCeilingPercent = int64(d.uvarint())
	p.ElasticCapacity = int64(d.uvarint())
	nk := d.uvarint()
	if nk > MaxKeyBy {
		return Policy{}, 0, fmt.Errorf("%w: %d key_by descriptors", ErrCorrupt, nk)
	}
	for i := uint64(0); i < nk; i++ {
		p.KeyBy = append(p.KeyBy, string(d.bytes()))
	}
	n := d.uvarint()
	if n > MaxLimits {
		return Policy{}, 0, fmt.Errorf("%w: %d limits", ErrCorrupt, n)
	}
	p.Limits = make([]Limit, n)
	for i := range p.Limits {
		p.Limits[i] = d.limit()
	}
	if flags&flagReduced != 0 {
		r := d.limit()
		p.Reduced = &r
	}
	if d.err != nil {
		return Policy{}, 0, d.err
	}
	return p, d.off, nil
}

func (d *decoder) limit() Limit {
	var l Limit
	l.Name = string(d.bytes())
	l.Algorithm = window.Algorithm(d.byte())
	l.Calendar = window.Unit(d.byte())
	if d.err == nil && (l.Algorithm > window.GCRA || l.Calendar > window.CalendarYear) {
		// Values are only ever added: see the mode's check in Decode.
		d.err = fmt.Errorf("%w: %w: algorithm %d, calendar %d", ErrCorrupt, ErrNewerVersion, l.Algorithm, l.Calendar)
	}
	l.Limit.Limit = int64(d.uvarint())
	l.Window = int64(d.uvarint())
	// Buckets is an int32: a larger count would come back negative and
	// re-encode as something no decoder reads.
	if b := d.uvarint(); b > math.MaxInt32 {
		d.fail()
	} else {
		l.Buckets = int32(b)
	}
	l.Burst = int64(d.uvarint())
	return l
}

// decoder reads varint-encoded fields, remembering the first error so call
// sites stay linear.
type decoder struct {
	src []byte
	off int
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil || d.off >= len(d.src) {
		d.fail()
		return 0
	}
	b := d.src[d.off]
	d.off++
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.src[d.off:])
	if n <= 0 || v > 1<<62 {
		d.fail()
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.src)-d.off) {
		d.fail()
		return nil
	}
	b := d.src[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated at byte %d", ErrCorrupt, d.off)
	}
}
