package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/window"
)

// A node whose --max-log-length cannot hold a stored policy's sliding log
// is refused as a member, naming its flag and the policy; one of an older
// release (no cap told) and one that holds every policy pass.
func TestCheckLogCap(t *testing.T) {
	logOf := func(limit int64) *policy.Policy {
		return &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: limit, Window: int64(window.MaxWindow / 2)}}}}
	}
	big, small := logOf(20_000), logOf(100)
	big.Name, small.Name = "big", "small"
	v := &fsm.MetaView{Policies: map[string]*policy.Policy{"big": big, "small": small}}
	for _, tc := range []struct {
		cap  int64
		want string // "" passes
	}{
		{0, ""},
		{50_000, ""},
		{20_000, ""},
		{10_000, "max_log_length: node n2's --max-log-length 10000 cannot hold policy big"},
	} {
		err := checkLogCap(v, &metav1.Node{Id: "n2", MaxLogLength: tc.cap})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("cap %d: %v", tc.cap, err)
		case tc.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("cap %d: %v, want ErrConfig naming %q", tc.cap, err, tc.want)
		}
	}
}
