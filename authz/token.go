package authz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/floodgate/floodgate/filewatch"
)

// minTokenLength refuses tokens short enough to guess.
const minTokenLength = 16

// Token is the bearer token of a role, read from a file and read again on
// Reload, so a token is rotated without a restart. The file may hold
// several tokens, one a line: the first is the one sent (by a node, or
// floodgatectl), and every one is accepted, so that nodes sharing a token
// keep accepting each other while it is rotated on one node after another
// (add the new token on a second line everywhere, then move it first,
// then drop the old one).
type Token struct {
	flag, file string
	v          atomic.Pointer[[][]byte]
	check      atomic.Pointer[func([][]byte) error]
	seen       atomic.Pointer[filewatch.Stamp] // the file's state when last loaded, for Watch
	// reloading is held (sent to) by a Reload: a SIGHUP's and the watch's
	// would otherwise each store what they read, the older read last. A
	// channel rather than a sync.Mutex, so that a reload waiting for
	// another is durably blocked in a testing/synctest bubble.
	reloading chan struct{}
}

// SetCheck makes every later Reload take new tokens only once check
// accepts them (say, none may be another role's token).
func (t *Token) SetCheck(check func(tokens [][]byte) error) { t.check.Store(&check) }

// LoadToken reads the tokens in file; errors name flag, the setting that
// named the file.
func LoadToken(flag, file string) (*Token, error) {
	t := &Token{flag: flag, file: file, reloading: make(chan struct{}, 1)}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again. On error the previous tokens stay.
// Reloads run one at a time, so the last to return took the file as it
// was when it started (or later).
func (t *Token) Reload() error {
	t.reloading <- struct{}{}
	defer func() { <-t.reloading }()
	st := filewatch.Of(t.file)
	b, err := os.ReadFile(t.file)
	if err != nil {
		return fmt.Errorf("%s: %w", t.flag, err)
	}
	var toks [][]byte
	for n, line := range strings.Split(string(b), "\n") {
		tok := strings.TrimSpace(line)
		switch {
		case tok == "":
			continue
		case len(tok) < minTokenLength:
			return fmt.Errorf("%s: the token on line %d of %s has %d characters, want at least %d", t.flag, n+1, t.file, len(tok), minTokenLength)
		case strings.ContainsAny(tok, " \t\r"):
			return fmt.Errorf("%s: the token on line %d of %s has white space inside it", t.flag, n+1, t.file)
		}
		if err := Sendable(tok); err != nil {
			return fmt.Errorf("%s: the token on line %d of %s %w", t.flag, n+1, t.file, err)
		}
		toks = append(toks, []byte(tok))
	}
	if len(toks) == 0 {
		return fmt.Errorf("%s: %s holds no token", t.flag, t.file)
	}
	if check := t.check.Load(); check != nil {
		if err := (*check)(toks); err != nil {
			return err
		}
	}
	t.v.Store(&toks)
	t.seen.Store(&st)
	return nil
}

// Sendable refuses a token that cannot travel in an authorization header:
// gRPC sends only printable ASCII there, and fails every call whose
// header holds another byte. Such a token (a byte-order mark an editor
// wrote, a no-break space pasted in, a letter with an accent) would load,
// and then every call sending it would fail: a node's every Peer call, at
// start or from a reload that replaced working tokens.
func Sendable(tok string) error {
	if strings.HasPrefix(tok, "\ufeff") {
		return errors.New("starts with a byte-order mark: save the file as plain UTF-8 or ASCII, without one")
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("has byte %#02x at position %d: a token is printable ASCII, as an authorization header carries", c, i+1)
		}
	}
	return nil
}

// Watch reloads the file whenever it changes (filewatch.Stamp),
// looking every interval, until ctx ends: a Kubernetes Secret updated in
// place reaches the node without a SIGHUP, which a distroless container
// has no kill command to send. A failed load goes to onError once per
// change of the file and is tried again at every look until it loads (a
// token refused for another file's, until that one is rotated too); the
// previous tokens stay in use.
func (t *Token) Watch(ctx context.Context, every time.Duration, onError func(error)) {
	filewatch.Watch(ctx, every, []string{t.file}, func() filewatch.Stamp { return *t.seen.Load() }, t.Reload, onError)
}

// Value returns the token to send: the file's first.
func (t *Token) Value() []byte { return (*t.v.Load())[0] }

// Values returns every token to accept.
func (t *Token) Values() [][]byte { return *t.v.Load() }

// Bearer sends token with every call as "authorization: Bearer <token>".
// requireTLS refuses to send it over a plaintext connection; a node on
// loopback without TLS may still use tokens.
func Bearer(token func() []byte, requireTLS bool) credentials.PerRPCCredentials {
	return bearer{token, requireTLS}
}

type bearer struct {
	token      func() []byte
	requireTLS bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b.token())}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.requireTLS }
