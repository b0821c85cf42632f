package raftnet

//lint:file-ignore SA1019 the requests carry raft's deprecated Leader and Candidate fields, as raft sends them.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// randBytes is nil or 1..40 random bytes (the decoder gives nil for none).
func randBytes(r *rand.Rand) []byte {
	if r.IntN(4) == 0 {
		return nil
	}
	b := make([]byte, 1+r.IntN(40))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randU64(r *rand.Rand) uint64 {
	switch r.IntN(3) {
	case 0:
		return uint64(r.IntN(200))
	case 1:
		return r.Uint64()
	}
	return 1<<63 + uint64(r.IntN(5))
}

// randConfiguration is a configuration raft decodes (raftnet refuses
// others: raft panics on them).
func randConfiguration(r *rand.Rand) []byte {
	var c raft.Configuration
	for i := range r.IntN(4) {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.ServerSuffrage(r.IntN(3)),
			ID: raft.ServerID(fmt.Sprint("n", i, r.Uint32())), Address: raft.ServerAddress(fmt.Sprint("h:", r.IntN(65536)))})
	}
	return raft.EncodeConfiguration(c)
}

func randHeader(r *rand.Rand) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(r.IntN(4)), ID: randBytes(r), Addr: randBytes(r)}
}

// randRequests returns one random request of each RPC type.
func randRequests(r *rand.Rand) []any {
	ae := &raft.AppendEntriesRequest{RPCHeader: randHeader(r), Term: randU64(r), Leader: randBytes(r),
		PrevLogEntry: randU64(r), PrevLogTerm: randU64(r), LeaderCommitIndex: randU64(r)}
	for range r.IntN(5) {
		l := &raft.Log{Index: randU64(r), Term: randU64(r), Type: raft.LogType(r.IntN(int(raft.LogConfiguration) + 1)), Data: randBytes(r), Extensions: randBytes(r)}
		if l.Type == raft.LogConfiguration {
			l.Data = randConfiguration(r)
		}
		if r.IntN(2) == 0 {
			l.AppendedAt = time.Unix(0, r.Int64N(1<<62))
		}
		ae.Entries = append(ae.Entries, l)
	}
	is := &raft.InstallSnapshotRequest{RPCHeader: randHeader(r), SnapshotVersion: raft.SnapshotVersion(r.IntN(3)),
		Term: randU64(r), Leader: randBytes(r), LastLogIndex: randU64(r), LastLogTerm: randU64(r),
		Peers: randBytes(r), Configuration: randBytes(r), ConfigurationIndex: randU64(r), Size: r.Int64N(1 << 40)}
	if is.SnapshotVersion > 0 {
		is.Configuration = randConfiguration(r)
	}
	return []any{
		ae,
		&raft.RequestVoteRequest{RPCHeader: randHeader(r), Term: randU64(r), Candidate: randBytes(r),
			LastLogIndex: randU64(r), LastLogTerm: randU64(r), LeadershipTransfer: r.IntN(2) == 0},
		&raft.RequestPreVoteRequest{RPCHeader: randHeader(r), Term: randU64(r), LastLogIndex: randU64(r), LastLogTerm: randU64(r)},
		&raft.TimeoutNowRequest{RPCHeader: randHeader(r)},
		is,
	}
}

// randResponses returns one random response of each RPC type.
func randResponses(r *rand.Rand) []any {
	return []any{
		&raft.AppendEntriesResponse{RPCHeader: randHeader(r), Term: randU64(r), LastLog: randU64(r), Success: r.IntN(2) == 0, NoRetryBackoff: r.IntN(2) == 0},
		&raft.RequestVoteResponse{RPCHeader: randHeader(r), Term: randU64(r), Peers: randBytes(r), Granted: r.IntN(2) == 0},
		&raft.RequestPreVoteResponse{RPCHeader: randHeader(r), Term: randU64(r), Granted: r.IntN(2) == 0},
		&raft.TimeoutNowResponse{RPCHeader: randHeader(r)},
		&raft.InstallSnapshotResponse{RPCHeader: randHeader(r), Term: randU64(r), Success: r.IntN(2) == 0},
	}
}

// Every request and response survives a frame unchanged, field for field
// (reflect.DeepEqual over raft's own structs, so a field raft adds and
// the codec forgets fails here).
func TestCodecRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		for _, req := range randRequests(r) {
			b, typ, err := appendRequest(nil, 7, "shard-3", req)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parseFrame(b[4:])
			if err != nil || f.kind != kindRequest || f.id != 7 || f.group != "shard-3" || f.rpc != typ {
				t.Fatalf("%T: frame %+v, %v", req, f, err)
			}
			got, err := decodeRequest(f.rpc, f.body)
			if err != nil {
				t.Fatalf("%T: %v", req, err)
			}
			if !reflect.DeepEqual(got, req) {
				t.Fatalf("%T: got %+v, sent %+v", req, got, req)
			}
		}
		for i, resp := range randResponses(r) {
			b := appendResponse(nil, 9, resp, nil)
			f, err := parseFrame(b[4:])
			if err != nil || f.kind != kindResponse || f.id != 9 {
				t.Fatalf("%T: frame %+v, %v", resp, f, err)
			}
			got := newResponse(byte(i) + rpcAppendEntries)
			if err := decodeResponse(f.body, got); err != nil {
				t.Fatalf("%T: %v", resp, err)
			}
			if !reflect.DeepEqual(got, resp) {
				t.Fatalf("%T: got %+v, sent %+v", resp, got, resp)
			}
		}
	}
}

// Raft's structs have exactly the fields the codec writes: a new one in a
// raft upgrade must be added to the codec (and the protocol version).
func TestCodecCoversEveryField(t *testing.T) {
	for _, c := range []struct {
		v any
		n int
	}{
		{raft.AppendEntriesRequest{}, 7}, {raft.AppendEntriesResponse{}, 5}, {raft.RequestVoteRequest{}, 6},
		{raft.RequestVoteResponse{}, 4}, {raft.RequestPreVoteRequest{}, 4}, {raft.RequestPreVoteResponse{}, 3},
		{raft.TimeoutNowRequest{}, 1}, {raft.TimeoutNowResponse{}, 1}, {raft.InstallSnapshotRequest{}, 10},
		{raft.InstallSnapshotResponse{}, 3}, {raft.Log{}, 6}, {raft.RPCHeader{}, 3},
	} {
		if got := reflect.TypeOf(c.v).NumField(); got != c.n {
			t.Errorf("%T has %d fields, the codec knows %d", c.v, got, c.n)
		}
	}
}

// A body cut short, or with bytes past its end, is refused, never read
// past (every prefix of every message), and an error frame carries its
// text.
func TestCodecRefusesDamagedBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		for _, req := range randRequests(r) {
			b, typ, _ := appendRequest(nil, 1, "g", req)
			f, _ := parseFrame(b[4:])
			for cut := range len(f.body) {
				if _, err := decodeRequest(typ, f.body[:cut]); err == nil {
					t.Fatalf("%T cut to %d of %d bytes decoded", req, cut, len(f.body))
				}
			}
			if _, err := decodeRequest(typ, append(bytes.Clone(f.body), 0)); err == nil {
				t.Fatalf("%T with a byte too many decoded", req)
			}
		}
	}
	if _, err := decodeRequest(99, nil); err == nil {
		t.Error("an unknown RPC type decoded")
	}
	b := appendResponse(nil, 4, nil, raft.ErrTransportShutdown)
	if f, err := parseFrame(b[4:]); err != nil || f.kind != kindError || string(f.body) != raft.ErrTransportShutdown.Error() {
		t.Errorf("error frame: %+v %v", f, err)
	}
}

// Heartbeats are told apart as NetworkTransport tells them.
func TestIsHeartbeat(t *testing.T) {
	hb := func() *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 3}
	}
	if !isHeartbeat(hb()) {
		t.Error("a heartbeat was not one")
	}
	for name, edit := range map[string]func(*raft.AppendEntriesRequest){
		"entries":      func(r *raft.AppendEntriesRequest) { r.Entries = []*raft.Log{{}} },
		"commit index": func(r *raft.AppendEntriesRequest) { r.LeaderCommitIndex = 1 },
		"prev entry":   func(r *raft.AppendEntriesRequest) { r.PrevLogEntry = 1 },
		"no term":      func(r *raft.AppendEntriesRequest) { r.Term = 0 },
		"no leader":    func(r *raft.AppendEntriesRequest) { r.RPCHeader.Addr = nil },
	} {
		r := hb()
		edit(r)
		if isHeartbeat(r) {
			t.Errorf("with %s: taken for a heartbeat", name)
		}
	}
	r := hb()
	r.RPCHeader.Addr, r.Leader = nil, []byte("old") // an older raft names the leader here
	if !isHeartbeat(r) {
		t.Error("a heartbeat naming its leader the old way was not one")
	}
}

// FuzzDecode: no input makes the decoders panic or read out of bounds,
// and what decodes encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, req := range randRequests(r) {
		b, _, _ := appendRequest(nil, 1, "g", req)
		f.Add(b[4:])
	}
	for _, resp := range randResponses(r) {
		f.Add(appendResponse(nil, 2, resp, nil)[4:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		fr, err := parseFrame(b)
		if err != nil {
			return
		}
		switch fr.kind {
		case kindRequest:
			cmd, err := decodeRequest(fr.rpc, fr.body)
			if err != nil {
				return
			}
			again, _, err := appendRequest(nil, fr.id, fr.group, cmd)
			if err != nil {
				t.Fatal(err)
			}
			fr2, _ := parseFrame(again[4:])
			cmd2, err := decodeRequest(fr2.rpc, fr2.body)
			if err != nil || !reflect.DeepEqual(cmd, cmd2) {
				t.Fatalf("re-encoded %T differs: %v", cmd, err)
			}
		case kindResponse:
			for t8 := rpcAppendEntries; t8 <= rpcInstallSnapshot; t8++ {
				_ = decodeResponse(fr.body, newResponse(t8))
			}
		}
	})
}
