package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// leaveAdmin counts the Leave calls it is sent.
type leaveAdmin struct {
	pb.UnimplementedAdminServer
	leaves atomic.Int32
}

func (a *leaveAdmin) Leave(_ context.Context, req *pb.LeaveRequest) (*pb.LeaveResponse, error) {
	a.leaves.Add(1)
	return &pb.LeaveResponse{NodeId: req.NodeId}, nil
}

// A negative --wait is refused before the node is asked to drain: taken
// for 0, a typo would start a drain and not wait for it.
func TestLeaveRefusesANegativeWait(t *testing.T) {
	a := &leaveAdmin{}
	addr := serveAdmin(t, a)
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs([]string{"--addr", addr, "leave", "n2", "--wait", "-5s"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--wait: must be 0 (do not wait) or more, got -5s") {
		t.Fatalf("leave --wait -5s: %v", err)
	}
	if n := a.leaves.Load(); n != 0 {
		t.Fatalf("leave --wait -5s sent %d Leave calls: the node drains", n)
	}
	root = newRoot(&out)
	root.SetArgs([]string{"--addr", addr, "leave", "n2", "--wait", "0"})
	if err := root.Execute(); err != nil || a.leaves.Load() != 1 {
		t.Fatalf("leave --wait 0: %v, %d calls", err, a.leaves.Load())
	}
}

// leave --wait asks the operator's address first and each member once: it
// put the members' addresses (names a laptop's port-forward cannot
// resolve) first and added them again at every poll.
func TestPollOrder(t *testing.T) {
	got := pollOrder("127.0.0.1:7700", []string{"n1:7700", "127.0.0.1:7700", "n2:7700", "n1:7700"})
	if want := []string{"127.0.0.1:7700", "n1:7700", "n2:7700"}; !slices.Equal(got, want) {
		t.Errorf("poll order %v, want %v", got, want)
	}
}
