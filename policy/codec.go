package policy

import (
	"encoding/binary"
	"fmt"

	"github.com/floodgate/floodgate/window"
)

// codecVersion is the first byte of an encoded policy. Bump it when the
// encoding changes; decoders keep reading every older version.
const codecVersion = 1

// AppendBinary appends p's encoding, as carried in shard log entries.
func (p *Policy) AppendBinary(dst []byte) []byte {
	dst = append(dst, codecVersion)
	dst = binary.AppendUvarint(dst, uint64(len(p.Name)))
	dst = append(dst, p.Name...)
	dst = binary.AppendUvarint(dst, uint64(len(p.Limits)))
	for i := range p.Limits {
		l := &p.Limits[i]
		dst = append(dst, byte(l.Algorithm), byte(l.Calendar))
		dst = binary.AppendUvarint(dst, uint64(l.Limit))
		dst = binary.AppendUvarint(dst, uint64(l.Window))
		dst = binary.AppendUvarint(dst, uint64(l.Buckets))
		dst = binary.AppendUvarint(dst, uint64(l.Burst))
	}
	return dst
}

// Decode reads a policy that AppendBinary encoded and returns the number of
// bytes read. It checks structure only; callers Validate what they accept
// from outside.
func Decode(src []byte) (Policy, int, error) {
	d := decoder{src: src}
	if v := d.byte(); v != codecVersion {
		return Policy{}, 0, fmt.Errorf("%w: unknown version %d", ErrCorrupt, v)
	}
	var p Policy
	p.Name = string(d.bytes())
	n := d.uvarint()
	if n > MaxLimits {
		return Policy{}, 0, fmt.Errorf("%w: %d limits", ErrCorrupt, n)
	}
	p.Limits = make([]window.Limit, n)
	for i := range p.Limits {
		l := &p.Limits[i]
		l.Algorithm = window.Algorithm(d.byte())
		l.Calendar = window.Unit(d.byte())
		l.Limit = int64(d.uvarint())
		l.Window = int64(d.uvarint())
		l.Buckets = int32(d.uvarint())
		l.Burst = int64(d.uvarint())
	}
	if d.err != nil {
		return Policy{}, 0, d.err
	}
	return p, d.off, nil
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
