package httpapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// pipeListener hands the server in-memory connections (net.Pipe), whose
// deadlines run on the bubble's fake clock.
type pipeListener struct {
	conns     chan net.Conn
	closeOnce sync.Once
	closed    chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// serveFake runs NewServer over the API of a fake limiter on a pipe
// listener until the test ends.
func serveFake(t *testing.T, f *fakeLimiter) *pipeListener {
	mux := http.NewServeMux()
	Register(mux, f, Options{})
	srv := NewServer(mux, nil)
	ln := newPipeListener()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln
}

// A client that sends its body slowly, or never, is answered 400 once the
// body has taken bodyTimeout, and the check never reaches the limiter.
func TestSlowBodyTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLimiter{limit: 9}
		c := serveFake(t, f).dial()
		defer c.Close()
		start := time.Now()
		go io.WriteString(c, "POST /v1/allow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"key\":")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if took := time.Since(start); took != bodyTimeout {
			t.Errorf("answered after %s, want %s", took, bodyTimeout)
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "body:") {
			t.Errorf("%d %s, want 400 naming body", resp.StatusCode, b)
		}
		if len(f.seen) != 0 {
			t.Errorf("the limiter saw %v", f.seen)
		}
	})
}

// slowLimiter is a limiter whose checks take a while, and which records
// whether a check's context was still alive when it answered.
type slowLimiter struct {
	fakeLimiter
	took  time.Duration
	alive bool
}

func (s *slowLimiter) Allow(ctx context.Context, r *pb.AllowRequest) (*pb.AllowResponse, error) {
	time.Sleep(s.took)
	s.alive = ctx.Err() == nil
	return s.fakeLimiter.Allow(ctx, r)
}

// A body that arrives in time is read whole, however it is split, and the
// body's deadline does not cut short a check that runs past it.
func TestBodyInTimeIsServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &slowLimiter{fakeLimiter: fakeLimiter{limit: 9}, took: 2 * bodyTimeout}
		mux := http.NewServeMux()
		Register(mux, l, Options{})
		srv := NewServer(mux, nil)
		ln := newPipeListener()
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		c := ln.dial()
		defer c.Close()
		body := `{"key":"k","limit":{"algorithm":"SLIDING_LOG","limit":5,"windowMs":60000}}`
		go func() {
			io.WriteString(c, "POST /v1/allow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+
				strconv.Itoa(len(body))+"\r\n\r\n"+body[:10])
			time.Sleep(bodyTimeout - time.Second)
			io.WriteString(c, body[10:])
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(l.seen) != 1 || !l.alive {
			t.Errorf("%d, limiter saw %d checks, context alive %v; want 200, 1, true", resp.StatusCode, len(l.seen), l.alive)
		}
	})
}

// A connection that sends nothing, stops inside its headers, or stays
// idle after a request is closed by the server's own timeouts.
func TestSilentConnectionsAreClosed(t *testing.T) {
	const get = "GET /api/v1/limit?key=k&limit=5&window=1m HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name string
		send string
		want time.Duration // from the last byte sent
	}{
		{"nothing at all", "", ReadHeaderTimeout},
		{"half a header", get[:30], ReadHeaderTimeout},
		{"idle after a request", get, IdleTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := serveFake(t, &fakeLimiter{limit: 9}).dial()
				defer c.Close()
				if _, err := io.WriteString(c, tc.send); err != nil {
					t.Fatal(err)
				}
				sent := time.Now()
				r := bufio.NewReader(c)
				if tc.send == get {
					resp, err := http.ReadResponse(r, nil)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
				}
				if _, err := io.ReadAll(r); err != nil && !errors.Is(err, io.ErrClosedPipe) {
					t.Fatal(err)
				}
				if took := time.Since(sent); took != tc.want {
					t.Errorf("closed after %s, want %s", took, tc.want)
				}
			})
		})
	}
}
