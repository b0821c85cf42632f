package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A body whose Content-Length is over the bound is refused at once (413),
// before any of it is sent: the server used to read up to 16 MiB of it,
// or wait for it until bodyTimeout when the client waited for an answer
// first (Expect: 100-continue, or a client that sends headers only).
func TestDeclaredTooLargeBodyRefusedAtOnce(t *testing.T) {
	s := serve(t, &fakeLimiter{limit: 9}, Draft)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/allow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", maxBody+1)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "Content-Length") {
		t.Fatalf("%d %s, want 413 naming the Content-Length", resp.StatusCode, b)
	}
}

// A body of a million empty checks (3 bytes each, 50 times that decoded)
// is refused before it is decoded; the largest batch the API takes, and
// strings full of commas and colons, are not.
func TestABodyOfTooManyValuesIsRefusedUndecoded(t *testing.T) {
	l := &fakeLimiter{limit: 9}
	s := serve(t, l, Draft)
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(s.URL+"/v1/allow:batch", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	bomb := `{"requests":[` + strings.Repeat("{},", 1_000_000) + `{}]}`
	if code, body := post(bomb); code != http.StatusBadRequest || !strings.Contains(body, "JSON values") {
		t.Fatalf("a million empty checks: %d %s, want 400 naming the body's values", code, body)
	}
	if len(l.seen) != 0 {
		t.Fatalf("%d checks reached the limiter", len(l.seen))
	}
	var b strings.Builder
	b.WriteString(`{"requests":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"policy":"api","descriptors":{`)
		for j := range 32 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"d%d":"v,:\"%d"`, j, i)
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`]}`)
	if code, body := post(b.String()); code != http.StatusOK {
		t.Fatalf("the largest batch (%d bytes): %d %.200s", b.Len(), code, body)
	}
	if n := jsonValues([]byte(`{"k":"a,b:c\",d","l":[1,2]}`)); n != 5 {
		t.Errorf("values of a small document: %d, want 5 (one more than its separators; none in strings)", n)
	}
}
