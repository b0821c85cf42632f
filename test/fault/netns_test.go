package fault

import "testing"

// TestNetMadeAgainAtOnce: the scenarios of one run make their networks one
// after another under the same names (the test's pid). The kernel takes a
// deleted namespace's devices away only later, so a Close that deleted the
// namespaces alone left the next NewNet a host end that still existed
// ("File exists", the one-way scenario failing in 0.09 s in CI).
func TestNetMadeAgainAtOnce(t *testing.T) {
	needNet(t)
	for round := range 10 {
		nt, err := NewNet(3)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		nt.Close()
	}
}
