package authz

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
)

// minTokenLength refuses tokens short enough to guess.
const minTokenLength = 16

// Token is a bearer token read from a file and read again on Reload, so a
// token is rotated without a restart.
type Token struct {
	flag, file string
	v          atomic.Pointer[[]byte]
	check      atomic.Pointer[func([]byte) error]
}

// SetCheck makes every later Reload take a new token only once check
// accepts it (say, it must differ from another role's token).
func (t *Token) SetCheck(check func(token []byte) error) { t.check.Store(&check) }

// LoadToken reads the token in file; errors name flag, the setting that
// named the file.
func LoadToken(flag, file string) (*Token, error) {
	t := &Token{flag: flag, file: file}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again. On error the previous token stays.
func (t *Token) Reload() error {
	b, err := os.ReadFile(t.file)
	if err != nil {
		return fmt.Errorf("%s: %w", t.flag, err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case len(tok) < minTokenLength:
		return fmt.Errorf("%s: the token in %s has %d characters, want at least %d", t.flag, t.file, len(tok), minTokenLength)
	case strings.ContainsAny(tok, " \t\r\n"):
		return fmt.Errorf("%s: the token in %s has white space inside it", t.flag, t.file)
	}
	v := []byte(tok)
	if check := t.check.Load(); check != nil {
		if err := (*check)(v); err != nil {
			return err
		}
	}
	t.v.Store(&v)
	return nil
}

// Value returns the current token.
func (t *Token) Value() []byte { return *t.v.Load() }

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
