//go:build clockskew

package wallclock

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The skew comes from the environment; a malformed one stops the process
// rather than pass for a clock in step. Run with go test -tags clockskew.
func TestSkewFromEnvironment(t *testing.T) {
	if os.Getenv("WANT_SKEW") == "" {
		for _, c := range []struct {
			env      string
			ok       bool
			contains string
		}{{"2s", true, "PASS"}, {"-300ms", true, "PASS"}, {"two seconds", false, SkewEnv}} {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestSkewFromEnvironment$", "-test.v")
			cmd.Env = append(os.Environ(), SkewEnv+"="+c.env, "WANT_SKEW="+c.env)
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.ok || !strings.Contains(string(out), c.contains) {
				t.Errorf("%s=%q: err %v, output:\n%s", SkewEnv, c.env, err, out)
			}
		}
		return
	}
	want, _ := time.ParseDuration(os.Getenv("WANT_SKEW"))
	if Skew() != want {
		t.Fatalf("Skew %v, want %v", Skew(), want)
	}
	if d := time.Until(Now()) - want; d < -time.Second || d > time.Second {
		t.Fatalf("Now is %v off the skew", d)
	}
}
