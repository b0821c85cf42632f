package policyfile

import (
	"errors"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/rpc/validate"
)

// A file's refusal names its fields as the file spells them: a limit's
// fields sit in the limit (not under "limit" as in the API), its window is
// "window", a Go duration, not window_ms in milliseconds.
func TestCheckSpellsFieldsAsTheFile(t *testing.T) {
	const head = "policies:\n  - name: a\n    limits:\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"zero window", head + "      - {algorithm: sliding_log, limit: 10, window: 0s}\n",
			"policies[0].limits[0].window: missing or 0: give a Go duration (1m, 24h) or a calendar unit"},
		{"no window", head + "      - {algorithm: gcra, limit: 10}\n", "policies[0].limits[0].window: missing or 0"},
		{"window over a year", head + "      - {algorithm: sliding_log, limit: 10, window: 9000h}\n",
			"policies[0].limits[0].window: 9000h is more than a year (8784h)"},
		{"reduced window", head + "      - {algorithm: sliding_log, limit: 10, window: 1m}\n    reduced: {algorithm: gcra, limit: 1}\n",
			"policies[0].reduced.window: missing or 0"},
		{"window and calendar", head + "      - {algorithm: fixed_window, limit: 10, window: 1m, calendar: day}\n",
			"policies[0].limits[0].window: must be unset when calendar is set"},
		{"limit", head + "      - {algorithm: sliding_log, limit: -1, window: 1m}\n", "policies[0].limits[0].limit: must be between 1 and"},
		{"burst", head + "      - {algorithm: token_bucket, limit: 10, window: 1m, burst: -4}\n", "policies[0].limits[0].burst: must be between 0 and"},
		{"reduced limit", head + "      - {algorithm: sliding_log, limit: 10, window: 1m}\n    reduced: {algorithm: gcra, limit: 0, window: 1m}\n",
			"policies[0].reduced.limit: must be between 1 and"},
		{"elastic", "policies:\n  - name: a\n    mode: elastic\n    elastic: {ceiling_percent: 5, capacity: 1}\n    limits:\n      - {algorithm: gcra, limit: 1, window: 1m}\n",
			"policies[0].elastic.ceiling_percent: must be more than 100"},
	} {
		err := Check(parse(t, tc.doc), 0)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error starting %q", tc.name, err, tc.want)
		}
		if !errors.Is(err, validate.ErrInvalid) {
			t.Errorf("%s: %v is not validate.ErrInvalid", tc.name, err)
		}
	}
}

// FileFields renames only policy limits' fields, wherever a message names
// them, and leaves the rest of the message as it is.
func TestFileFields(t *testing.T) {
	for in, want := range map[string]string{
		"invalid request: policies[2].reduced.limit.window_ms: got 0":       "invalid request: policies[2].reduced.window: got 0",
		"policies[0].limits[11].limit.limit: too many; policies[3] is fine": "policies[0].limits[11].limit: too many; policies[3] is fine",
		"policies[0].name: a limit.window_ms is not a name":                 "policies[0].name: a limit.window_ms is not a name",
		"limit.window_ms: an inline limit, not a file's":                    "limit.window_ms: an inline limit, not a file's",
	} {
		if got := FileFields(in); got != want {
			t.Errorf("FileFields(%q) = %q, want %q", in, got, want)
		}
	}
}
