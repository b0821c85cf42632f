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
