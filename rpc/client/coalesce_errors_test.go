package client

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A node that refuses a batch as invalid has counted none of it: each
// check goes again alone, and only the bad one fails.
func TestInvalidBatchGoesAgainAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond, invalid: map[string]bool{"k2": true}}
		co := f.coalescer()
		fill(co, "n1")
		got := answers(co, "n1", keysOf("k", 4))
		for k, err := range got {
			if want := codes.OK; k == "k2" {
				want = codes.InvalidArgument
				if status.Code(err) != want {
					t.Errorf("%s: %v, want %v", k, err, want)
				}
			} else if err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
		singles := 0
		for _, c := range f.log() {
			if !c.batch {
				singles++
			}
		}
		if want := laneLight + 4; singles != want {
			t.Errorf("%d single calls, want %d (those in flight and each of the 4 again)", singles, want)
		}
		settle(t, co)
	})
}

// A batch the node refuses for one check it names: that check's caller
// gets the refusal (as a call of its own would have worded it), the
// others go again together. Sent each alone, a caller whose check only
// the node refuses, retrying at once, turned nearly every batch into as
// many calls as checks.
func TestABatchRefusedForOneCheckGoesAgainWithoutIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond, invalid: map[string]bool{"k2": true}, numbered: true}
		co := f.coalescer()
		fill(co, "n1")
		got := answers(co, "n1", keysOf("k", 6))
		for k, err := range got {
			if k == "k2" {
				if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "invalid request: key: refused" {
					t.Errorf("%s: %v, want the refusal of key", k, err)
				}
			} else if err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
		var batches [][]string
		singles := 0
		for _, c := range f.log() {
			if c.batch {
				batches = append(batches, c.keys)
			} else {
				singles++
			}
		}
		if singles != laneLight || len(batches) != 2 || len(batches[1]) != 5 || slices.Contains(batches[1], "k2") {
			t.Errorf("%d single calls (want the %d in flight), batches %v: want the 6 and then the 5 others", singles, laneLight, batches)
		}
		settle(t, co)
	})
}

// A node names one refused check a call. Many refused checks in one batch
// (a limit every node refuses, queued by many callers) cost the others
// three round trips: the batch, the batch without the first refused, then
// each alone, all at once. They cost one round trip each, one after
// another, before: 700 refused beside 100 good took 600 calls in a row,
// and the good checks ran out their deadline.
func TestManyRefusedChecksCostTheOthersThreeRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 5 * time.Millisecond
		bad := keysOf("bad", 700)
		invalid := map[string]bool{}
		for _, k := range bad {
			invalid[k] = true
		}
		f := &fakeNodes{delay: rtt, invalid: invalid, numbered: true}
		co := f.coalescer()
		fill(co, "n1")
		start := time.Now()
		got := answers(co, "n1", append(keysOf("good", 100), bad...))
		if took := time.Since(start); took > 5*rtt {
			t.Errorf("answered after %v: want about three round trips of %v", took, rtt)
		}
		for k, err := range got {
			if invalid[k] != (status.Code(err) == codes.InvalidArgument) || (!invalid[k] && err != nil) {
				t.Errorf("%s: %v", k, err)
			}
		}
		batches := 0
		for _, c := range f.log() {
			if c.batch {
				batches++
			}
		}
		if batches != 2 {
			t.Errorf("%d batch calls, want 2 before the checks go alone", batches)
		}
		settle(t, co)
	})
}

// A batch's answers map back to their callers: an item's error becomes
// that caller's error with its code (an error never reads as success),
// and a failed call fails every caller in it.
func TestBatchErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		refuse error
		item   func(string) *pb.AllowBatchItem
		want   map[string]codes.Code
	}{
		{"an item's error is its caller's", nil, func(k string) *pb.AllowBatchItem {
			if k == "k1" {
				return &pb.AllowBatchItem{Error: &pb.ItemError{Code: uint32(codes.Unavailable), Message: "no quorum"}}
			}
			return nil
		}, map[string]codes.Code{"k0": codes.OK, "k1": codes.Unavailable, "k2": codes.OK}},
		{"an error with code OK is still an error", nil, func(k string) *pb.AllowBatchItem {
			if k == "k0" {
				return &pb.AllowBatchItem{Error: &pb.ItemError{Message: "?"}}
			}
			return nil
		}, map[string]codes.Code{"k0": codes.Unknown, "k1": codes.OK, "k2": codes.OK}},
		{"an empty item is an error", nil, func(k string) *pb.AllowBatchItem {
			if k == "k2" {
				return &pb.AllowBatchItem{}
			}
			return nil
		}, map[string]codes.Code{"k0": codes.OK, "k1": codes.OK, "k2": codes.Internal}},
		{"a failed call fails all", status.Error(codes.Unavailable, "node stopping"), nil,
			map[string]codes.Code{"k0": codes.Unavailable, "k1": codes.Unavailable, "k2": codes.Unavailable}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeNodes{delay: time.Millisecond, refuse: c.refuse, item: c.item}
				co := f.coalescer()
				fill(co, "n1")
				for k, err := range answers(co, "n1", keysOf("k", 3)) {
					if status.Code(err) != c.want[k] {
						t.Errorf("%s: %v, want %v", k, err, c.want[k])
					}
				}
				settle(t, co)
			})
		})
	}
}

// A node that answers fewer checks than it was sent fails them all:
// which answer is whose is unknown.
func TestShortAnswerFailsAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNodes{delay: time.Millisecond}
		co := newCoalescer(f.one, func(ctx context.Context, addr string, reqs []*pb.AllowRequest) (*pb.AllowBatchResponse, error) {
			resp, err := f.many(ctx, addr, reqs)
			if err == nil {
				resp.Results = resp.Results[1:]
			}
			return resp, err
		})
		fill(co, "n1")
		for k, err := range answers(co, "n1", keysOf("k", 3)) {
			if status.Code(err) != codes.Internal {
				t.Errorf("%s: %v, want Internal", k, err)
			}
		}
		settle(t, co)
	})
}
