package rpc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc"
	"github.com/floodgate/floodgate/test/inproc"
)

// saveBackup asks n for a backup, as floodgatectl snapshot save does.
func saveBackup(t *testing.T, n *inproc.Node) []byte {
	t.Helper()
	stream, err := n.Admin().SaveSnapshot(context.Background(), &pb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			return data
		}
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, chunk.Data...)
	}
}

// restoreBackup sends data to n, as floodgatectl snapshot restore does.
func restoreBackup(t *testing.T, n *inproc.Node, data []byte) (*pb.RestoreSnapshotResponse, error) {
	t.Helper()
	stream, err := n.Admin().RestoreSnapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for len(data) > 0 {
		k := min(len(data), 1<<20)
		if err := stream.Send(&pb.SnapshotChunk{Data: data[:k]}); err != nil {
			break // the answer says why
		}
		data = data[k:]
	}
	return stream.CloseAndRecv()
}

// writeBackup writes a backup of policies and states records.
func writeBackup(t *testing.T, policies []*pb.Policy, states ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := backup.NewWriter(&buf)
	if err := w.Policies(policies); err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if err := w.States(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// shiftLogTime moves the log time of states (the shard snapshot format:
// "FGSS", version, log time as a varint, ..., CRC-32C) by d and
// recomputes the checksum: a backup edited, or taken where clocks ran
// fast.
func shiftLogTime(t *testing.T, states []byte, d time.Duration) (shifted []byte, logTime int64) {
	t.Helper()
	now, k := binary.Varint(states[5:])
	if k <= 0 {
		t.Fatal("no log time")
	}
	out := binary.AppendVarint(bytes.Clone(states[:5]), now+int64(d))
	out = append(out, states[5+k:len(states)-4]...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli))), now + int64(d)
}

// shortLimit is floodgatectl allow KEY --limit 1 --window 500ms: short,
// so that a test waits little for a window to pass on a real node's clock.
var shortLimit = &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1, WindowMs: 500}

// shortPasses outlasts shortLimit's window.
const shortPasses = 600 * time.Millisecond

func allowShort(t *testing.T, n *inproc.Node, key string) bool {
	t.Helper()
	resp, err := n.Limiter().Allow(context.Background(), &pb.AllowRequest{Key: key, Limit: shortLimit})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Allowed
}

// A backup whose log time is ahead of the node's clock beyond the
// cluster's clock tolerance is refused whole, naming the group record and
// both times, and nothing is restored: restored, it would move the
// group's clock a day ahead, so every key would stay denied for a day.
// A group's leader refuses such states from a peer alike.
func TestRestoreRefusesALogTimeAhead(t *testing.T) {
	n := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	if _, err := n.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
		{Name: "saved", Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_SLIDING_LOG, 10, 60_000)}}}}); err != nil {
		t.Fatal(err)
	}
	allowShort(t, n, "x1")
	b, err := backup.Parse(saveBackup(t, n))
	if err != nil {
		t.Fatal(err)
	}
	group := n.Node.GroupOfKey("x1")
	var shifted [][]byte
	var mine []byte // the shifted record holding x1
	var ahead int64
	first, firstAhead := -1, int64(0) // the first record a day ahead (a group never used has log time 0)
	for i, s := range b.States {
		sh, lt := shiftLogTime(t, s, 24*time.Hour)
		shifted = append(shifted, sh)
		if first < 0 && lt > time.Now().UnixNano() {
			first, firstAhead = i, lt
		}
		sp := fsm.Splitter{GroupOf: n.Node.GroupOfKey}
		if parts, _, err := sp.Split(sh); err != nil {
			t.Fatal(err)
		} else if parts[group] != nil {
			mine, ahead = parts[group], lt
		}
	}
	if mine == nil {
		t.Fatal("no record holds x1")
	}
	if _, err := n.Admin().DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: "saved"}); err != nil {
		t.Fatal(err)
	}
	shiftedFile := writeBackup(t, b.Policies, shifted...)
	parsed, err := backup.Parse(shiftedFile)
	if err != nil {
		t.Fatal(err)
	}

	_, err = restoreBackup(t, n, shiftedFile)
	record := fmt.Sprintf("group record %d of %d (at byte %d)", first+1, len(b.States), parsed.StatesAt[first])
	at := func(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), record) ||
		!strings.Contains(err.Error(), "log time ahead of this node's clock: "+at(firstAhead)) || !strings.Contains(err.Error(), "this node's clock 20") {
		t.Fatalf("a backup a day ahead: %v, want InvalidArgument naming %s and both times", err, record)
	}
	aheadAt := at(ahead)
	_, err = peerv1.NewPeerClient(n.Conn()).RestoreGroup(ctx, &peerv1.RestoreGroupRequest{Group: uint32(group), States: mine})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), fmt.Sprintf("shard-%d: states", group)) ||
		!strings.Contains(err.Error(), aheadAt) || !strings.Contains(err.Error(), "this node's clock 20") {
		t.Fatalf("a peer's states a day ahead (log time %s): %v", aheadAt, err)
	}
	// Nothing was restored: not the policy, and every group's clock goes
	// on, so a new key's short window passes as the wall clock's does.
	if _, err := n.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "saved"}); status.Code(err) != codes.NotFound {
		t.Fatalf("the refused backup's policy: %v", err)
	}
	for _, key := range []string{"x1", "x2"} {
		time.Sleep(shortPasses) // x1's window from before the backup passes too
		if !allowShort(t, n, key) || allowShort(t, n, key) {
			t.Fatalf("%s: the first check should pass and the second be denied", key)
		}
		time.Sleep(shortPasses)
		if !allowShort(t, n, key) {
			t.Fatalf("%s: still denied after its window: the group's clock stands still", key)
		}
	}
	// The same backup as it was saved restores.
	if _, err := restoreBackup(t, n, writeBackup(t, b.Policies, b.States...)); err != nil {
		t.Fatalf("the backup as saved: %v", err)
	}
}

// manyPolicies returns n valid policies named p0, p1, ...
func manyPolicies(n int) []*pb.Policy {
	ps := make([]*pb.Policy, n)
	for i := range ps {
		ps[i] = &pb.Policy{Name: fmt.Sprintf("p%d", i), Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_FIXED_WINDOW, int64(10+i), 60_000)}}
	}
	return ps
}

func policyCount(t *testing.T, n *inproc.Node) int {
	t.Helper()
	list, err := n.Admin().ListPolicies(context.Background(), &pb.ListPoliciesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Policies)
}

// A backup of a cluster holding more policies than one SetPolicies call
// takes restores; a bad policy anywhere among them, or one that would
// change a stored policy's colocate, refuses the backup and stores none.
func TestRestoreMoreThanAThousandPolicies(t *testing.T) {
	n := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	if _, err := n.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
		{Name: "p1003", Colocate: true, Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_FIXED_WINDOW, 5, 60_000)}}}}); err != nil {
		t.Fatal(err)
	}
	bad := manyPolicies(1006)
	bad[1005].Limits = nil
	_, err := restoreBackup(t, n, writeBackup(t, bad))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "policies[1005].limits") {
		t.Fatalf("a bad policy at 1005: %v", err)
	}
	_, err = restoreBackup(t, n, writeBackup(t, manyPolicies(1006))) // p1003 without colocate
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "policies[1003].colocate") {
		t.Fatalf("a colocate change at 1003: %v", err)
	}
	if got := policyCount(t, n); got != 1 {
		t.Fatalf("refused backups stored policies: %d held", got)
	}
	if _, err := n.Admin().DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: "p1003"}); err != nil {
		t.Fatal(err)
	}
	resp, err := restoreBackup(t, n, writeBackup(t, manyPolicies(1006)))
	if err != nil || resp.Policies != 1006 {
		t.Fatalf("1006 policies: %v %v", resp, err)
	}
	if got := policyCount(t, n); got != 1006 {
		t.Fatalf("%d policies held after the restore, want 1006", got)
	}
}

// A restore counts each key once, however many group records hold it (a
// backup of an older release, taken while slots moved); an error inside
// a group record names it and where it is in the file, and nothing is
// restored.
func TestRestoreCountsKeysOnceAndNamesBadRecords(t *testing.T) {
	n := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	for _, key := range []string{"a", "b", "c"} {
		allowShort(t, n, key)
	}
	b, err := backup.Parse(saveBackup(t, n))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := restoreBackup(t, n, writeBackup(t, nil, append(b.States, b.States...)...))
	if err != nil || resp.Keys != 3 {
		t.Fatalf("a backup holding each of 3 keys twice: %v keys, %v", resp.GetKeys(), err)
	}

	pols := []*pb.Policy{{Name: "new", Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_SLIDING_LOG, 10, 60_000)}}}
	damaged := writeBackup(t, pols, b.States[0], []byte("FGSS\x01 damaged states"))
	parsed, err := backup.Parse(damaged)
	if err != nil {
		t.Fatal(err)
	}
	_, err = restoreBackup(t, n, damaged)
	want := fmt.Sprintf("group record 2 of 2 (at byte %d)", parsed.StatesAt[1])
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), fsm.ErrCorrupt.Error()) {
		t.Fatalf("damaged states: %v, want InvalidArgument naming %q", err, want)
	}
	if _, err := n.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "new"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused backup stored its policy: %v", err)
	}
}

// A policy refused as the restore stores it (its colocate changed by
// another call since the restore checked it; here between two meta
// entries of a backup of 1006) is named by its index in the backup, not
// in its entry, and the error says what was stored before it.
func TestRestoreNamesAPolicyRefusedAsItIsStored(t *testing.T) {
	n := inproc.Cluster(t, 1)[0]
	ctx := context.Background()
	peers := rpc.NewPeers()
	t.Cleanup(func() { peers.Close() })
	cfg := n.RPC
	cfg.LeaderWait = 2 * time.Second // NewServer's default, which NewAdminServer does not fill
	a := rpc.NewAdminServer(n.Node, peers, cfg)
	_, err := rpc.RestoreWith(ctx, a, writeBackup(t, manyPolicies(1006)),
		func(ctx context.Context, ps []*policy.Policy, own func(context.Context, []*policy.Policy) error) error {
			if ps[0].Name == "p1000" {
				if _, err := n.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
					{Name: "p1003", Colocate: true, Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_FIXED_WINDOW, 5, 60_000)}}}}); err != nil {
					t.Fatal(err)
				}
			}
			return own(ctx, ps)
		})
	if !errors.Is(err, fsm.ErrRefused) || !strings.Contains(err.Error(), "backup: policies[1003].colocate") ||
		!strings.Contains(err.Error(), "stored before this: 0 of 0 parts of the backup's group states, and 1000 of its 1006 policies; once what was refused is resolved") {
		t.Fatalf("p1003's colocate changed between the entries: %v", err)
	}
}

// A restore that a group refuses as full (--max-key-states, counting the
// states it holds besides the backup's, which only its leader knows)
// leaves the cluster's policies as they were: it stored the backup's
// first, so the operator's limit was replaced by the backup's (here 20
// times higher) with none of its counts restored, and a run again failed
// the same way. The error says the group is full and what would finish it.
func TestARestoreRefusedAsFullLeavesThePolicies(t *testing.T) {
	ctx := context.Background()
	check := func(n *inproc.Node, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: fmt.Sprintf("user:%d", i), Policy: "api"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	setAPI := func(n *inproc.Node, limit int64) {
		t.Helper()
		if _, err := n.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
			{Name: "api", Limits: []*pb.PolicyLimit{pl("h", pb.Algorithm_SLIDING_LOG, limit, 3_600_000)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	src := inproc.Cluster(t, 1)[0]
	setAPI(src, 100)
	check(src, 0, 100)
	data := saveBackup(t, src)

	dst := inproc.ClusterOf(t, 1, func(c *cluster.Config) { c.Shards, c.MaxKeyStates = 1, 120 })[0]
	setAPI(dst, 5)
	check(dst, 1000, 1060) // other keys: 60 held + the backup's 100 > 120
	_, err := restoreBackup(t, dst, data)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "raise --max-key-states") {
		t.Fatalf("restore into a group without room: %v, want ResourceExhausted saying how to make room", err)
	}
	got, err := dst.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetLimits()[0].GetLimit().GetLimit(); l != 5 {
		t.Fatalf("policy api's limit is %d after the refused restore, want the cluster's 5", l)
	}
}
