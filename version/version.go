package version

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// Info describes a build.
type Info struct {
	Version  string // module version, "(devel)" for a local build
	Revision string // VCS revision, "" when unknown
	Time     string // VCS commit time
	Modified bool   // the tree had uncommitted changes
	Go       string // Go version that built it
}

// Override, when set at link time (-ldflags "-X
// github.com/floodgate/floodgate/version.Override=v1.2.3"), is the version
// reported: make release and the Dockerfile stamp the release's tag, which
// a build outside a module proxy does not otherwise know.
var Override string

// buildInfo is the binary's build information, read (and parsed) once:
// the node reports its version on every reconcile.
var buildInfo = sync.OnceValues(debug.ReadBuildInfo)

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := buildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	in := fromBuildInfo(bi)
	if Override != "" {
		in.Version = Override
	}
	return in
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Go: bi.GoVersion}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is one line: "floodgate v1.2.3 (rev 0123abcd, 2026-11-24T08:00:00Z, go1.26.8)".
func (in Info) String() string {
	rev := in.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = "unknown"
	}
	if in.Modified {
		rev += "+modified"
	}
	s := fmt.Sprintf("%s (rev %s", in.Version, rev)
	if in.Time != "" {
		s += ", " + in.Time
	}
	return s + ", " + in.Go + ")"
}
