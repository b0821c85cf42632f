package client

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// hangingAdmin answers Status but never GetPolicy (a node paused, or
// stuck on its meta group, since the client's last refresh).
type hangingAdmin struct {
	*statusNode
	asked atomic.Int64
}

func (h *hangingAdmin) GetPolicy(ctx context.Context, _ *pb.GetPolicyRequest) (*pb.Policy, error) {
	h.asked.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// refusalNode refuses every check with msg.
type refusalNode struct {
	pb.UnimplementedRateLimiterServer
	msg string
}

func (r refusalNode) Allow(context.Context, *pb.AllowRequest) (*pb.AllowResponse, error) {
	return nil, status.Error(codes.InvalidArgument, r.msg)
}

// A check of a policy the client does not know yet asks a node for it
// only when the node refused a plain key for a policy with key_by, and
// no longer than a call may: it waited for the caller's deadline (with
// the middleware's request context, until the client hung up), and every
// check naming a mistyped policy cost a second call.
func TestLearningAPolicyIsBoundedAndOnlyForKeyBy(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		asked int64
	}{
		{`invalid request: policy: unknown policy "apii"`, 0},
		{"invalid request: key: policy apii " + validate.KeyedByDescriptors + " user", 1},
	} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		adm := &hangingAdmin{statusNode: &statusNode{answers: 1 << 30}}
		s := grpc.NewServer()
		pb.RegisterAdminServer(s, adm)
		pb.RegisterRateLimiterServer(s, refusalNode{msg: tc.msg})
		go s.Serve(lis)
		adm.nodes = []string{lis.Addr().String()}
		c, err := New(context.Background(), Options{Addrs: adm.nodes, CallTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		_, err = c.Policy("apii").Allow(ctx, D{"key": "k"})
		took := time.Since(start)
		cancel()
		c.Close()
		s.Stop()
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want the node's refusal", tc.msg, err)
		}
		if took > 2*time.Second {
			t.Errorf("%s: took %v with a CallTimeout of 100ms", tc.msg, took)
		}
		if got := adm.asked.Load(); got != tc.asked {
			t.Errorf("%s: asked for the policy %d times, want %d", tc.msg, got, tc.asked)
		}
	}
}
