package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// A data dir gets its incarnation once, when first saved, and keeps it;
// another dir gets another; a damaged file is refused, naming it.
func TestLoadIncarnation(t *testing.T) {
	dir := t.TempDir()
	a, created, err := loadIncarnation(dir)
	if err != nil || len(a) != 32 || !validIncarnation(a) || !created {
		t.Fatalf("first open: %q %v %v", a, created, err)
	}
	if again, created, err := loadIncarnation(dir); err != nil || again == a || !created {
		t.Fatalf("opened again before it was saved: %q %v %v, want another, made now", again, created, err)
	}
	if err := saveIncarnation(dir, a); err != nil {
		t.Fatal(err)
	}
	if again, created, err := loadIncarnation(dir); err != nil || again != a || created {
		t.Fatalf("reopened: %q %v %v, want %q, not created", again, created, err, a)
	}
	if b, _, err := loadIncarnation(t.TempDir()); err != nil || b == a {
		t.Fatalf("another dir: %q %v", b, err)
	}
	for _, bad := range []string{"", "xyz\n", strings.Repeat("A", 32)} {
		if err := os.WriteFile(filepath.Join(dir, "incarnation"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := loadIncarnation(dir); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "incarnation") {
			t.Errorf("file holding %q: %v, want a refusal naming the file", bad, err)
		}
	}
}

// The same node id with another data dir's incarnation is refused; a
// record or a node without one (a release before them) is taken.
func TestCheckIncarnation(t *testing.T) {
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 32)
	node := func(inc string) *metav1.Node { return &metav1.Node{Id: "n2", Incarnation: inc} }
	for _, tc := range []struct {
		name      string
		old, node *metav1.Node
		refused   bool
	}{
		{"a new member", nil, node(a), false},
		{"the same dir", node(a), node(a), false},
		{"another dir", node(a), node(b), true},
		{"a record from before incarnations", node(""), node(b), false},
		{"a node from before incarnations", node(a), node(""), false},
	} {
		err := checkIncarnation(tc.old, tc.node)
		if refused := err != nil; refused != tc.refused || (refused && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "node.incarnation"))) {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refused)
		}
	}
	if err := checkNode(&metav1.Node{Id: "n2", GrpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", GossipAddr: "127.0.0.1:3", Incarnation: "xyz"}); err == nil ||
		!strings.Contains(err.Error(), "node.incarnation") {
		t.Errorf("a malformed incarnation: %v", err)
	}
}
