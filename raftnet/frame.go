package raftnet

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// Frame kinds.
const (
	kindRequest  byte = 1 // id, RPC type, group, request body
	kindResponse byte = 2 // id, response body
	kindError    byte = 3 // id, error text
)

// maxFrame bounds a frame a reader accepts, and a sender sends: raft
// batches up to 64 entries an AppendEntries whatever their size, so the
// sender sends fewer when they do not fit (fitEntries). The largest entry
// is a slot move's import, up to 64 MiB (fsm.MaxExport) when an older
// release writes it; this one writes pieces of about 4 MiB
// (fsm.PieceBytes). A variable only for tests.
var maxFrame uint32 = 256 << 20

// frame is a decoded frame; body aliases the reader's buffer until the
// next read.
type frame struct {
	kind  byte
	id    uint64
	rpc   byte
	group string
	body  []byte
}

// beginFrame reserves a frame's length in b and appends its kind and id.
func beginFrame(b []byte, kind byte, id uint64) ([]byte, int) {
	at := len(b)
	b = append(b, 0, 0, 0, 0, kind)
	return binary.AppendUvarint(b, id), at
}

// endFrame writes the length of the frame that starts at at.
func endFrame(b []byte, at int) []byte {
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// appendRequest appends a request frame for cmd of group.
func appendRequest(b []byte, id uint64, group string, cmd any) ([]byte, byte, error) {
	if len(group) == 0 || len(group) > 255 {
		return b, 0, fmt.Errorf("raftnet: bad group name %q", group)
	}
	start := len(b)
	b, at := beginFrame(b, kindRequest, id)
	rpcAt := len(b)
	b = append(b, 0, byte(len(group)))
	b = append(b, group...)
	b, t, err := encodeRequest(b, cmd)
	if err != nil {
		return b[:start], 0, err
	}
	if size := len(b) - at - 4; size > int(maxFrame) {
		return b[:start], 0, fmt.Errorf("raftnet: %T of %d bytes, over %d", cmd, size, maxFrame)
	}
	b[rpcAt] = t
	return endFrame(b, at), t, nil
}

// appendResponse appends a response frame for resp, or an error frame.
func appendResponse(b []byte, id uint64, resp any, rpcErr error) []byte {
	if rpcErr == nil {
		// On failure the frame begun in rb is dropped: b still ends
		// where it did, and the error frame goes there.
		rb, at := beginFrame(b, kindResponse, id)
		rb, err := encodeResponse(rb, resp)
		if err == nil {
			return endFrame(rb, at)
		}
		rpcErr = err
	}
	b, at := beginFrame(b, kindError, id)
	b = append(b, rpcErr.Error()...)
	return endFrame(b, at)
}

// readFrame reads the next frame into buf (grown as needed) and returns it
// with the buffer to reuse.
func readFrame(r *bufio.Reader, buf []byte) (frame, []byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return frame{}, buf, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame || size == 0 {
		return frame{}, buf, fmt.Errorf("raftnet: frame of %d bytes", size)
	}
	if cap(buf) > maxKeptBuffer {
		buf = nil // the caller is done with the last frame: keep no big buffer
	}
	if cap(buf) >= int(size) {
		buf = buf[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			return frame{}, buf, err
		}
	} else {
		// Grow with the data that arrives, not with what the length claims.
		buf = buf[:0]
		for len(buf) < int(size) {
			chunk := min(int(size)-len(buf), max(readBuffer, len(buf)))
			buf = slices.Grow(buf, chunk)
			n, err := io.ReadFull(r, buf[len(buf):len(buf)+chunk])
			buf = buf[:len(buf)+n]
			if err != nil {
				return frame{}, buf, err
			}
		}
	}
	f, err := parseFrame(buf)
	return f, buf, err
}

// parseFrame splits a frame's bytes (after its length).
func parseFrame(b []byte) (frame, error) {
	f := frame{kind: b[0]}
	id, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return frame{}, errShort
	}
	f.id, b = id, b[1+n:]
	switch f.kind {
	case kindRequest:
		if len(b) < 2 || len(b) < 2+int(b[1]) || b[1] == 0 {
			return frame{}, errShort
		}
		f.rpc, f.group, f.body = b[0], string(b[2:2+int(b[1])]), b[2+int(b[1]):]
	case kindResponse, kindError:
		f.body = b
	default:
		return frame{}, fmt.Errorf("raftnet: unknown frame kind %d", f.kind)
	}
	return f, nil
}
