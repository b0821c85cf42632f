package policyfile

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"
)

// MaxFileBytes bounds a policy file: gRPC's bound on the message that
// stores its policies, which a larger file could not fit. A file is read
// whole before it is parsed, so the bound is also what reading costs.
const MaxFileBytes = 16 << 20

// readText reads a policy file whole and checks that it is text YAML can
// read, saying where it is not: yaml.v3 says only "invalid trailing UTF-8
// octet" or "control characters are not allowed", with no line, which in
// a file of a thousand policies leaves the byte to be hunted for.
func readText(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("more than %d MiB: the cluster could not take so many policies in one call", MaxFileBytes>>20)
	}
	if bytes.HasPrefix(b, []byte{0xfe, 0xff}) || bytes.HasPrefix(b, []byte{0xff, 0xfe}) {
		return b, nil // UTF-16, which YAML reads too
	}
	line, col := 1, 1
	for i := 0; i < len(b); {
		c, size := utf8.DecodeRune(b[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			return nil, fmt.Errorf("line %d, column %d: byte %#02x is not UTF-8: save the file as UTF-8", line, col, b[i])
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r', c == 0x7f:
			return nil, fmt.Errorf("line %d, column %d: control character %U: YAML does not allow it", line, col, c)
		case c == '\n':
			line, col = line+1, 0
		}
		i += size
		col++
	}
	return b, nil
}
