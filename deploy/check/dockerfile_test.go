package check

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	op, args string
	stage    int
}

func dockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	stage := -1
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		op, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		op = strings.ToUpper(op)
		if op == "FROM" {
			stage++
		}
		out = append(out, instruction{op, strings.TrimSpace(args), stage})
	}
	return out
}

func TestDockerfileShape(t *testing.T) {
	ins := dockerfile(t)
	var froms, copies []string
	last := map[string]string{}
	for _, in := range ins {
		if in.op == "FROM" {
			froms = append(froms, in.args)
		}
		if in.stage == 1 {
			last[in.op] = in.args
			if in.op == "COPY" {
				copies = append(copies, in.args)
			}
		}
	}
	if len(froms) != 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(froms))
	}
	goMod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	if !strings.HasPrefix(froms[0], "golang:"+string(goVer[1])) {
		t.Errorf("build stage %q does not use go.mod's Go %s", froms[0], goVer[1])
	}
	for _, f := range froms {
		if !strings.Contains(strings.Fields(f)[0], ":") {
			t.Errorf("base image %q has no tag", f)
		}
	}
	if !strings.HasPrefix(froms[1], "gcr.io/distroless/static") {
		t.Errorf("runtime stage %q is not distroless static", froms[1])
	}
	if u := last["USER"]; u == "" || strings.HasPrefix(u, "root") || strings.HasPrefix(u, "0") {
		t.Errorf("runs as %q, want a non-root user", u)
	}
	if !strings.Contains(last["ENTRYPOINT"], "/usr/local/bin/floodgate") || !slices.ContainsFunc(copies, func(c string) bool { return strings.Contains(c, "floodgatectl") }) {
		t.Errorf("the image must hold both binaries and run floodgate: COPY %q ENTRYPOINT %q", copies, last["ENTRYPOINT"])
	}
	// The volume's directory exists in the image, owned by the user that
	// runs: distroless has none, and Docker would create it root-owned.
	if vol := last["VOLUME"]; vol != "" {
		dir := strings.Trim(vol, `[]" `)
		if !slices.ContainsFunc(copies, func(c string) bool {
			return strings.HasPrefix(c, "--from=build --chown=65532:65532 ") && strings.HasSuffix(c, " "+dir)
		}) {
			t.Errorf("VOLUME %s is not created in the image owned by 65532 (COPY --chown): the nonroot user could not write it", dir)
		}
	}
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "bin", "dist", "*.test", "/floodgate", "/floodgatectl"} {
		if !slices.Contains(strings.Fields(string(ignore)), want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
	// A plain docker run -p 7700:7700 reaches the node: floodgate's
	// defaults bind loopback, unreachable from outside a container.
	for _, bind := range []string{`"--grpc-addr", "0.0.0.0:7700"`, `"--http-addr", "0.0.0.0:7701"`} {
		if !strings.Contains(last["CMD"], bind) {
			t.Errorf("CMD %q lacks %s: with no arguments the image serves on loopback only", last["CMD"], bind)
		}
	}
	exposed := strings.Fields(last["EXPOSE"])
	for _, p := range []string{"7700", "7701", "7702", "7703", "7703/udp"} {
		if !slices.Contains(exposed, p) {
			t.Errorf("EXPOSE lacks %s", p)
		}
	}
}

// The build stage's go build steps, run here, make static binaries that
// report the version the image is stamped with.
func TestDockerfileBuildSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	out := t.TempDir()
	ran := 0
	for _, in := range dockerfile(t) {
		if in.stage != 0 || in.op != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		script := strings.ReplaceAll(in.args, "${VERSION}", "v0.0.0-check")
		script = strings.ReplaceAll(script, "/out/", out+"/")
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = "../.."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("RUN %s: %v\n%s", in.args, err, b)
		}
		ran++
	}
	if ran == 0 {
		t.Fatal("no go build step in the Dockerfile")
	}
	for _, bin := range []string{"floodgate", "floodgatectl"} {
		path := filepath.Join(out, bin)
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked: distroless static has no loader", bin)
			}
		}
		f.Close()
		b, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(b), "v0.0.0-check") {
			t.Errorf("%s --version: %s %v", bin, b, err)
		}
	}
}
