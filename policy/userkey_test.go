package policy

import (
	"testing"
)

// UserKey undoes ColocatedKey for the policy's own keys, takes any key of
// a policy that does not colocate as it is, and refuses a key of a
// colocating policy without its own tag (another policy's, or none) —
// without allocating.
func TestUserKey(t *testing.T) {
	shop := &Policy{Name: "shop", Colocate: true}
	plain := &Policy{Name: "plain"}
	for _, tc := range []struct {
		p      *Policy
		stored string
		want   string
		ok     bool
	}{
		{shop, shop.ColocatedKey("user:1"), "user:1", true},
		{shop, shop.ColocatedKey(""), "", true},
		{shop, "user:1", "", false},
		{shop, (&Policy{Name: "cart", Colocate: true}).ColocatedKey("k"), "", false},
		{shop, (&Policy{Name: "shopx", Colocate: true}).ColocatedKey("k"), "", false},
		{shop, "\x00shop", "", false},
		{plain, "user:1", "user:1", true},
		{plain, shop.ColocatedKey("k"), shop.ColocatedKey("k"), true},
		{nil, "k", "k", true},
	} {
		got, ok := tc.p.UserKey(tc.stored)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v.UserKey(%q) = %q, %v; want %q, %v", tc.p, tc.stored, got, ok, tc.want, tc.ok)
		}
	}
	stored := shop.ColocatedKey("user:1")
	if n := testing.AllocsPerRun(100, func() { _, _ = shop.UserKey(stored) }); n != 0 {
		t.Errorf("UserKey allocates %v times", n)
	}
}
