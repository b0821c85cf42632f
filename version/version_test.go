package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-24T08:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	if got, want := fromBuildInfo(bi).String(), "v1.2.3 (rev 0123456789ab+modified, 2026-11-24T08:00:00Z, go1.26.8)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8"}).String(); got != "(devel) (rev unknown, go1.26.8)" {
		t.Errorf("bare build: %q", got)
	}
}

func TestGetReadsThisBinary(t *testing.T) {
	if in := Get(); !strings.HasPrefix(in.Go, "go") {
		t.Errorf("Get() = %+v", in)
	}
}

// A version stamped at link time (make release, the Dockerfile) is the
// one reported.
func TestOverride(t *testing.T) {
	defer func(v string) { Override = v }(Override)
	Override = "v1.2.3"
	if got := Get().Version; got != "v1.2.3" {
		t.Fatalf("version %q, want the override", got)
	}
}
