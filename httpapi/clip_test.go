package httpapi

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An error names the field and shows the start of what was sent, never a
// whole parameter, name or path of hundreds of kilobytes: each came back
// whole in the 400's body.
func TestErrorsDoNotEchoHugeInput(t *testing.T) {
	s := serve(t, &validatingLimiter{fakeLimiter{limit: 9}}, Draft)
	huge := strings.Repeat("A", 600_000)
	for name, c := range map[string]struct {
		method, path, body, want string
	}{
		"descriptor":      {"GET", "/api/v1/limit?descriptor=" + huge, "", "descriptor: "},
		"parameter name":  {"GET", "/api/v1/limit?key=k&" + huge + "=1", "", "unknown parameter"},
		"window":          {"GET", "/api/v1/limit?key=k&limit=5&window=" + huge, "", "window: "},
		"semicolon":       {"GET", "/api/v1/limit?key=k;" + huge, "", "holds a semicolon"},
		"json field name": {"POST", "/v1/allow", `{"` + huge + `":1}`, "body: "},
		"path":            {"GET", "/" + huge, "", "path: "},
	} {
		resp, e, err := sendForError(t, c.method, s.URL+c.path, c.body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		msg := e.Error.Message
		if resp.StatusCode/100 != 4 || !strings.Contains(msg, c.want) || len(msg) > 1024 || !strings.Contains(msg, "bytes)") {
			t.Errorf("%s: %d, a message of %d bytes starting %.200q: want a 4xx naming %q in under 1 KiB, saying how long the input was",
				name, resp.StatusCode, len(msg), msg, c.want)
		}
	}
}

func TestClipKeepsWholeCharacters(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	got := clip(s)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "... (200 bytes)") {
		t.Fatalf("clip: %q", got)
	}
	if clip("short") != "short" {
		t.Fatal("a short text was clipped")
	}
}
