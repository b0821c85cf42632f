package httpapi

import (
	"fmt"
	"unicode/utf8"
)

// clipAt is the most bytes of a request's text an error quotes.
const clipAt = 128

// clip returns s, or its first clipAt bytes (whole characters) and how
// long it was when it is longer: errors name the field and show what was
// sent, but a parameter of a megabyte is not sent back whole.
func clip(s string) string {
	if len(s) <= clipAt {
		return s
	}
	cut := clipAt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}
