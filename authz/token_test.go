package authz

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/floodgate/floodgate/filewatch"
)

// writeToken installs body at file by rename, as a Kubernetes Secret
// update does, with modification time mod.
func writeToken(t *testing.T, file, body string, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(file+".tmp", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file+".tmp", mod, mod); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
}

// A token file rewritten on disk is taken at Watch's next look, without a
// SIGHUP (token files used to be read again on SIGHUP only, which a
// distroless pod cannot send itself); a broken one is reported once and
// the previous tokens stay.
func TestTokenWatch(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	base := time.Now().Add(-time.Hour) // real times: file stamps are real
	writeToken(t, file, adminTok+"\n", base)
	synctest.Test(t, func(t *testing.T) {
		tok, err := LoadToken("admin-token-file", file)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var errs []error
		stopped := make(chan struct{})
		go func() {
			tok.Watch(ctx, 10*time.Second, func(err error) { errs = append(errs, err) })
			close(stopped)
		}()
		const next = "rotated-token-9876543210"
		writeToken(t, file, next+"\n", base.Add(time.Minute))
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if got := string(tok.Value()); got != next {
			t.Fatalf("after the interval the token is %q", got)
		}

		writeToken(t, file, "short\n", base.Add(2*time.Minute))
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if len(errs) != 1 || string(tok.Value()) != next {
			t.Fatalf("a short token: errors %v, token %q", errs, tok.Value())
		}

		cancel()
		synctest.Wait()
		select {
		case <-stopped:
		default:
			t.Fatal("Watch did not stop with its context")
		}
	})
}

// A token refused by SetCheck's rule (the other role's, say) is tried
// again at every look, and taken once the rule holds, with no further
// change of its file.
func TestTokenWatchRetriesARefusedLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	base := time.Now().Add(-time.Hour)
	writeToken(t, file, adminTok+"\n", base)
	synctest.Test(t, func(t *testing.T) {
		tok, err := LoadToken("peer-token-file", file)
		if err != nil {
			t.Fatal(err)
		}
		const next = "rotated-token-9876543210"
		var otherRotated atomic.Bool
		tok.SetCheck(func(v [][]byte) error {
			if string(v[0]) == next && !otherRotated.Load() {
				return errors.New("still the admin token")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var errs []error
		go tok.Watch(ctx, 10*time.Second, func(err error) { errs = append(errs, err) })
		writeToken(t, file, next+"\n", base.Add(time.Minute))
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if string(tok.Value()) != adminTok || len(errs) != 1 {
			t.Fatalf("refused: token %q, errors %v (want one)", tok.Value(), errs)
		}
		otherRotated.Store(true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if string(tok.Value()) != next || len(errs) != 1 {
			t.Fatalf("once the rule holds: token %q, errors %v", tok.Value(), errs)
		}
	})
}

// The bearer scheme is matched whatever its case, on gRPC and on HTTP: a
// token sent as "bearer <token>" or "BEARER <token>" used to count as no
// token at all (Unauthenticated, 401).
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	rules := &Rules{AdminToken: static(adminTok), PeerToken: static(peerTok)}
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", scheme+" "+adminTok))
		if err := rules.authorize(ctx, "/floodgate.v1.Admin/Leave"); err != nil {
			t.Errorf("gRPC, %q: %v", scheme, err)
		}
		req := httptest.NewRequest("GET", "/debug/pprof/", nil)
		req.Header.Set("Authorization", scheme+" "+adminTok)
		rec := httptest.NewRecorder()
		rules.HTTP(Admin, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("HTTP, %q: %d", scheme, rec.Code)
		}
	}
	if _, ok := bearerToken("Basic " + adminTok); ok {
		t.Error("a Basic credential read as a bearer token")
	}
}

// A token gRPC cannot send (a byte-order mark an editor wrote, a no-break
// space pasted in, an accented letter, a control character) is refused
// at load and at reload, naming the flag and the line, and the previous
// tokens stay. It used to load, and every call sending it then failed
// with "header key "authorization" contains value with non-printable
// ASCII characters": a peer token rotated that way cut the node off from
// every other.
func TestTokenRefusesUnsendable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(adminTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadToken("peer-token-file", file)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"byte-order mark": "\ufeff" + adminTok + "\n",
		"no-break space":  "abcdefgh\u00a0ijklmnopq\n",
		"accented letter": "abcdefgh\u00e9ijklmnopq\n",
		"vertical tab":    "abcdefgh\vijklmnopq\n",
		"NUL":             "abcdefgh\x00ijklmnopq\n",
		"second line":     adminTok + "\nabcdefgh\x7fijklmnopq\n",
	} {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		line := "line 1 "
		if name == "second line" {
			line = "line 2 "
		}
		if err := tok.Reload(); err == nil || !strings.Contains(err.Error(), "peer-token-file: ") || !strings.Contains(err.Error(), line) {
			t.Errorf("%s: reload got %v, want a refusal naming peer-token-file and %s", name, err, line)
		}
		if _, err := LoadToken("peer-token-file", file); err == nil {
			t.Errorf("%s: loaded", name)
		}
		if got := tok.Values(); len(got) != 1 || string(got[0]) != adminTok {
			t.Errorf("%s: a refused reload replaced the tokens: %q", name, got)
		}
	}
}

// Reloads of one file are taken one after another: a SIGHUP's and the
// watch's, or two SIGHUPs, never leave the tokens of the older read in
// use. A reload that read the file before a rotation used to store its
// tokens after one that read it after, so the revoked token stayed
// accepted; and with the stamp of the newer read stored last, the watch
// saw nothing left to reload.
func TestTokenReloadsDoNotInterleave(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	base := time.Now().Add(-time.Hour)
	writeToken(t, file, adminTok+"\n", base)
	synctest.Test(t, func(t *testing.T) {
		tok, err := LoadToken("admin-token-file", file)
		if err != nil {
			t.Fatal(err)
		}
		// The first reload stops between reading the file and taking its
		// tokens, in the check; the second runs meanwhile.
		read, release := make(chan struct{}), make(chan struct{})
		tok.SetCheck(func(v [][]byte) error {
			if string(v[0]) == adminTok {
				close(read)
				<-release
			}
			return nil
		})
		var wg sync.WaitGroup
		var errA, errB error
		wg.Go(func() { errA = tok.Reload() })
		<-read
		const next = "rotated-token-9876543210"
		writeToken(t, file, next+"\n", base.Add(time.Minute))
		wg.Go(func() { errB = tok.Reload() })
		synctest.Wait() // the second reload is done, or waits for the first
		close(release)
		wg.Wait()
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if got := tok.Values(); len(got) != 1 || string(got[0]) != next {
			t.Errorf("after both reloads: %q, want the rotated token alone", got)
		}
		if *tok.seen.Load() != filewatch.Of(file) {
			t.Error("the stamp recorded is not the file's as last read")
		}
	})
}
