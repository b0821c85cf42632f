package cluster

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

// A freeze keeps the lane's fast checks refused until its entry's outcome
// is known, however long the commit takes: longer than a reconcile pass
// (5s) here. A fast check answered while the freeze might still apply
// would be counted in the overlay, its hit written after the freeze and
// dropped at apply (the slot is frozen): admitted, counted nowhere,
// missing from the export the target imports. No failover is involved.
func TestFastCheckAnsweredWhileFreezeOutcomeUnknownIsExported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		defer rig.stop(t)
		close(rig.g.gate)
		// The group owns the single slot of the cluster.
		if err := rig.r.Apply(fsm.EncodeInit(0, 1, []uint32{0}), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
		defer lane.close()
		if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		lane.drain()
		rig.g.gate = make(chan struct{}) // command entries now wait to apply
		const move = 9
		go func() { _ = freeze(lane, rig.r, move, []uint32{0}, time.Second) }()
		time.Sleep(6 * time.Second) // longer than a reconcile pass
		admitted := int64(1)
		if res, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err == nil && res.Allowed {
			admitted++
		}
		close(rig.g.gate)
		time.Sleep(time.Second) // the freeze, then the lane's batch, apply
		synctest.Wait()
		export, err := rig.g.shard.ExportSlots(move, []uint32{0})
		if err != nil {
			t.Fatal(err)
		}
		target := fsm.NewShard()
		for i, e := range [][]byte{fsm.EncodeInit(1, 1, nil), fsm.EncodeImport(move, 0, []uint32{0}, export)} {
			if resp := target.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: e}); resp != nil {
				t.Fatalf("target: %v", resp)
			}
		}
		resp := target.Apply(&raft.Log{Index: 3, Type: raft.LogCommand,
			Data: fsm.EncodeAllow(nil, time.Now().UnixNano(), []fsm.Check{{Key: "k", Policy: fastPolicy, Cost: 0}})})
		got := fastPolicy.Limits[0].Limit.Limit - resp.([]policy.Result)[0].Remaining
		if got != admitted {
			t.Errorf("the target imported a count of %d for k, %d were admitted", got, admitted)
		}
	})
}
