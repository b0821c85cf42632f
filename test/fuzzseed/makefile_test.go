package fuzzseed

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fuzzFunc matches the declaration of a fuzz target.
var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w*)\(\w+ \*testing\.F\)`)

// TestMakeFuzzRunsEveryTarget: `make fuzz` fuzzes every fuzz target of the
// module, as the README and `make help` say ("every decoder"): its FUZZ
// list names each one, as package:Target, and nothing else.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	root := filepath.Join("..", "..")
	var want []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root {
				// Another module (deploy/check) is not fuzzed by make fuzz.
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(b), -1) {
			want = append(want, "./"+filepath.ToSlash(rel)+"/:"+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("found no fuzz target")
	}
	got := makeFuzzList(t, filepath.Join(root, "Makefile"))
	slices.Sort(want)
	slices.Sort(got)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("make fuzz does not run %s: add it to the Makefile's FUZZ", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("the Makefile's FUZZ names %s, which is no fuzz target", g)
		}
	}
}

// makeFuzzList reads the words of the Makefile's `FUZZ :=` assignment,
// continuation lines included.
func makeFuzzList(t *testing.T, makefile string) []string {
	t.Helper()
	b, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if !in {
			name, value, ok := strings.Cut(line, ":=")
			if !ok || strings.TrimSpace(name) != "FUZZ" {
				continue
			}
			in, line = true, value
		}
		cont := strings.HasSuffix(strings.TrimSpace(line), `\`)
		words = append(words, strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), `\`))...)
		if !cont {
			break
		}
	}
	if len(words) == 0 {
		t.Fatal("no FUZZ list in the Makefile")
	}
	return words
}
