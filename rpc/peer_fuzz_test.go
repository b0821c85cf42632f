package rpc

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/test/fuzzseed"
)

// peerSeeds are Peer request bodies as they arrive on the wire: forwards
// of every sample policy, resets, meta commands, and broken ones.
func peerSeeds(t testing.TB) []fuzzseed.Seed {
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fwd := &peerv1.ForwardRequest{}
	for i, p := range fuzzseed.Policies() {
		fwd.Checks = append(fwd.Checks, &peerv1.ForwardCheck{Shard: uint32(i), Key: fmt.Sprintf("user:%d", i), Policy: p.AppendBinary(nil), Cost: 1})
	}
	api := fuzzseed.Policies()[1].AppendBinary(nil)
	broken := &peerv1.ForwardRequest{Checks: []*peerv1.ForwardCheck{
		{Key: "k", Policy: append(api[:len(api):len(api)], 0), Cost: 1}, // trailing byte
		{Key: "k", Policy: api[:len(api)/2], Cost: 1},                   // truncated
		{Key: "k", Policy: append([]byte{2}, api[1:]...), Cost: 1},      // version 2
		{Key: "k", Policy: api, Cost: -1},
		{Key: "k", Policy: api, Cost: 1 << 40},
	}}
	initCmd, err := fsm.EncodeMeta(fsm.MetaInitCluster, &metav1.InitCluster{ClusterId: "c1", Shards: 8, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	full := marshal(fwd)
	seeds := []fuzzseed.Seed{
		{Name: "forward-every-policy", Data: full},
		{Name: "forward-broken-policies", Data: marshal(broken)},
		{Name: "reset", Data: marshal(&peerv1.PeerResetRequest{Shard: 3, Key: "user:1", Policy: api})},
		{Name: "apply-meta-init", Data: marshal(&peerv1.ApplyMetaRequest{Command: initCmd})},
		{Name: "apply-meta-unknown-type", Data: marshal(&peerv1.ApplyMetaRequest{Command: []byte{200, 1, 2}})},
		{Name: "length-beyond-input", Data: []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a}},
		{Name: "empty", Data: nil},
	}
	return append(seeds, fuzzseed.Truncations("forward", full[:min(len(full), 120)], 5)...)
}

// FuzzPeerRequests decodes any bytes as the Peer server's requests and
// runs what the server does before reaching Raft: decoding and validating
// each forwarded policy (and cost), and applying a meta command to a
// state machine. Nothing may panic (but for the documented stop on an
// unknown meta entry type), and a policy the server accepts must be
// exactly what its bytes encode.
func FuzzPeerRequests(f *testing.F) {
	fuzzseed.Add(f, peerSeeds(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := &PeerServer{maxLog: 0}
		var fwd peerv1.ForwardRequest
		if proto.Unmarshal(data, &fwd) == nil {
			for _, c := range fwd.Checks {
				d := srv.decodePolicy(c.Policy, srv.maxLog)
				checkDecodedPolicy(t, c.Policy, d)
				if d.err == nil {
					_ = d.p.ValidateCost(c.Cost)
				}
			}
		}
		var reset peerv1.PeerResetRequest
		if proto.Unmarshal(data, &reset) == nil {
			checkDecodedPolicy(t, reset.Policy, srv.decodePolicy(reset.Policy, srv.maxLog))
		}
		var meta peerv1.ApplyMetaRequest
		if proto.Unmarshal(data, &meta) == nil && len(meta.Command) > 0 {
			applyMetaCommand(t, meta.Command)
		}
	})
}

// checkDecodedPolicy checks that an accepted policy is valid and
// re-encodes to exactly the bytes it came from (the server refuses
// trailing bytes, and the encoding of a valid policy is canonical but for
// varint spellings and unused flag bits, which re-decoding must forgive).
func checkDecodedPolicy(t *testing.T, b []byte, d decodedPolicy) {
	t.Helper()
	if d.err != nil {
		if d.p != nil {
			t.Fatalf("refused policy (%v) came with a policy", d.err)
		}
		return
	}
	if err := d.p.Validate(0); err != nil {
		t.Fatalf("accepted policy is invalid: %v", err)
	}
	q, n, err := policy.Decode(d.p.AppendBinary(nil))
	if err != nil || !reflect.DeepEqual(&q, d.p) {
		t.Fatalf("accepted policy %+v re-decodes as %+v (%d bytes, %v)", d.p, q, n, err)
	}
}

// applyMetaCommand applies a forwarded meta command as the meta leader
// would; only the documented stop on an unknown type may panic.
func applyMetaCommand(t *testing.T, cmd []byte) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if err, _ := r.(error); cmd[0] >= fsm.MetaInitCluster && cmd[0] <= fsm.MetaDeletePolicy || !errors.Is(err, fsm.ErrUnknownEntry) {
				panic(r)
			}
		}
	}()
	m := fsm.NewMeta()
	if resp := m.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: cmd}); resp != nil {
		if _, ok := resp.(error); !ok {
			t.Fatalf("meta apply answered %v", resp)
		}
	}
}
