package client

import (
	"testing"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

func TestSlotTable(t *testing.T) {
	runs := []*pb.SlotRun{{First: 0, Count: 3, Group: 2}, {First: 3, Count: 1, Group: 0}}
	got := slotTable(&pb.StatusResponse{Shards: 4, Slots: 4, SlotTable: runs})
	if want := []uint32{2, 2, 2, 0}; len(got) != 4 || got[0] != want[0] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("table %v, want %v", got, want)
	}
	for name, st := range map[string]*pb.StatusResponse{
		"legacy":         {Shards: 4},
		"short":          {Shards: 4, Slots: 4, SlotTable: runs[:1]},
		"past the end":   {Shards: 4, Slots: 4, SlotTable: []*pb.SlotRun{{First: 2, Count: 3, Group: 1}, {First: 0, Count: 2}}},
		"overlapping":    {Shards: 4, Slots: 4, SlotTable: []*pb.SlotRun{{First: 0, Count: 2}, {First: 1, Count: 2}}},
		"negative group": {Shards: 4, Slots: 4, SlotTable: []*pb.SlotRun{{First: 0, Count: 4, Group: -1}}},
		"slots≠shards":   {Shards: 8, Slots: 4, SlotTable: []*pb.SlotRun{{First: 0, Count: 4}}},
		// More slots than a cluster can have: a broken status, which
		// would have the client expand a table as large as it claims.
		"too many slots": {Shards: maxSlots + 1, Slots: maxSlots + 1, SlotTable: []*pb.SlotRun{{First: 0, Count: maxSlots + 1}}},
	} {
		if slotTable(st) != nil {
			t.Errorf("%s: a table the client must not trust was accepted", name)
		}
	}
}
