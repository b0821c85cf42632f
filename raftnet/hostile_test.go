package raftnet

//lint:file-ignore SA1019 the requests carry raft's deprecated Leader and Candidate fields, as raft sends them.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// An InstallSnapshot request in a link frame (not on a snapshot
// connection of its own) is answered with an error and never reaches raft:
// raft v1.7.3's installSnapshot runs `io.Copy(io.Discard, rpc.Reader)` in
// a defer, so a nil Reader would panic raft's main goroutine, and one
// frame from any peer would crash the node.
func TestInstallSnapshotOnALinkIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := newLinkedPair(t, 5*time.Second)
		a, bAddr, aT, bT := lp.a, lp.bAddr, lp.aT, lp.bT
		got := make(chan raft.RPC, 1)
		go func() {
			select {
			case rpc := <-bT.Consumer():
				got <- rpc
				rpc.Respond(&raft.InstallSnapshotResponse{}, nil)
			case <-bT.closed:
			}
		}()
		l, err := a.linkTo(bAddr)
		if err != nil {
			t.Fatal(err)
		}
		req := &raft.InstallSnapshotRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, SnapshotVersion: 1, Term: 1, Size: 10}
		err = aT.roundTrip(l, req, &raft.InstallSnapshotResponse{})
		synctest.Wait()
		select {
		case rpc := <-got:
			t.Errorf("raft was handed %T with Reader %v (raft's installSnapshot panics on a nil Reader); call err=%v",
				rpc.Command, rpc.Reader, err)
		default:
			if err == nil {
				t.Error("an InstallSnapshot on a link was answered without an error")
			}
		}
	})
}

// The same, end to end with a real raft: the node must survive. Runs the
// scenario in a child process because the bug kills the process.
func TestInstallSnapshotOnALinkDoesNotCrashRaft(t *testing.T) {
	if os.Getenv("RAFTNET_CRASH_CHILD") == "1" {
		victim := newNode(t, "v")
		victim.start(t, "g", nil)
		if err := victim.rafts["g"].BootstrapCluster(raft.Configuration{Servers: []raft.Server{
			{ID: "v", Address: victim.addr()}}}).Error(); err != nil {
			t.Fatal(err)
		}
		leaderOf(t, []*node{victim}, "g")
		attacker := newNode(t, "x")
		defer attacker.net.Close()
		aT, err := attacker.net.Transport("g", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := attacker.net.linkTo(victim.addr())
		if err != nil {
			t.Fatal(err)
		}
		req := &raft.InstallSnapshotRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("x"), Addr: []byte("x")}, SnapshotVersion: 1, Term: 0, Size: 0}
		resp := &raft.InstallSnapshotResponse{}
		err = aT.roundTrip(l, req, resp)
		t.Logf("child: roundTrip err=%v resp=%+v", err, resp)
		// A barrier passes raft's main loop after the request: had raft
		// taken it, that loop would have panicked first.
		if err := victim.rafts["g"].Barrier(5 * time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		victim.stop()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInstallSnapshotOnALinkDoesNotCrashRaft$", "-test.count=1")
	cmd.Env = append(os.Environ(), "RAFTNET_CRASH_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s := string(out)
		if i := strings.Index(s, "panic:"); i >= 0 {
			s = s[i:min(len(s), i+600)]
		}
		t.Fatalf("the node died: %v\n%s", err, s)
	}
}

// A pipeline whose answers raft stopped taking fails its next send after
// the link's timeout instead of waiting for room forever: raft's
// pipelineDecode returns on the first unsuccessful or newer-term answer,
// its send loop may still call AppendEntries before it notices, and it
// closes the pipeline only once that call returns (else the replication
// goroutine, and raft.Shutdown, would hang).
func TestPipelineSendDoesNotHangWhenRaftStopsTakingAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Second
		lp := newLinkedPair(t, timeout)
		bAddr, aT, bT := lp.bAddr, lp.aT, lp.bT
		answer(bT)
		p, err := aT.AppendEntriesPipeline("b", bAddr)
		if err != nil {
			t.Fatal(err)
		}
		send := func(i int) error {
			req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 1, PrevLogEntry: uint64(i), PrevLogTerm: 1,
				Entries: []*raft.Log{{Index: uint64(i + 1), Term: 1}}}
			_, err := p.AppendEntries(req, &raft.AppendEntriesResponse{})
			return err
		}
		for i := range maxInFlight {
			if err := send(i); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		<-p.Consumer() // raft's decoder takes one answer, finds it unsuccessful, and stops
		if err := send(maxInFlight); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		res := make(chan error, 1)
		go func() { res <- send(maxInFlight + 1) }() // the send loop did not see finishCh yet
		select {
		case err := <-res:
			t.Logf("send returned %v", err)
		case <-time.After(100 * timeout):
			t.Errorf("AppendEntries still blocked after %s although nothing will ever drain the pipeline", 100*timeout)
			p.Close() // let the test end
			<-res
		}
	})
}

// A link that carried nothing for a while (this node led nothing the peer
// is in) stays up while its first new call is answered within the
// timeout: the watch fails a link only when a call waited a whole timeout
// with nothing coming back, not because the last thing received is old.
func TestIdleLinkSurvivesAFreshCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Second
		lp := newLinkedPair(t, timeout)
		bAddr, aT, bT := lp.bAddr, lp.aT, lp.bT
		go func() { // raft with a 300ms fsync per vote
			for {
				select {
				case rpc := <-bT.Consumer():
					time.Sleep(300 * time.Millisecond)
					rpc.Respond(&raft.RequestVoteResponse{Term: 1, Granted: true}, nil)
				case <-bT.closed:
					return
				}
			}
		}()
		vote := func() error {
			req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 1, Candidate: []byte("a")}
			return aT.RequestVote("b", bAddr, req, &raft.RequestVoteResponse{})
		}
		if err := vote(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * timeout) // idle: the link stays up, nothing to send
		if err := vote(); err != nil {
			t.Errorf("a call answered in 300ms with a %s timeout failed: %v", timeout, err)
		}
		time.Sleep(time.Second) // let the responder finish
	})
}

// A response body that fails to decode leaves raft's response zeroed:
// raft's pipelineDecode never calls Error() but reads resp.Success, so a
// damaged (or newer-version) answer must not count as a successful append.
func TestDamagedResponseLeavesNoSuccess(t *testing.T) {
	good := appendResponse(nil, 1, &raft.AppendEntriesResponse{Term: 1, LastLog: 9, Success: true}, nil)
	for _, body := range [][]byte{
		append(append([]byte(nil), good[6:]...), 0), // a byte past the end
		good[6 : len(good)-1],                       // NoRetryBackoff cut off
	} {
		resp := &raft.AppendEntriesResponse{}
		err := decodeResponse(body, resp)
		if err == nil {
			t.Fatal("a damaged body decoded")
		}
		if resp.Success {
			t.Errorf("decode failed (%v) but resp.Success = true, LastLog = %d", err, resp.LastLog)
		}
	}
}

// readFrame allocates with the data that arrives, not with what four bytes
// of length claim (up to maxFrame, 256 MiB, from any connection past the
// 6-byte hello), and keeps no buffer over maxKeptBuffer once a smaller
// frame follows.
func TestReadFrameAllocatesWithTheData(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], maxFrame)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, buf, err := readFrame(bufio.NewReader(bytes.NewReader(hdr[:])), nil)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a truncated frame was read")
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("4 bytes of header allocated %d MiB (buffer kept: cap %d MiB)", grew>>20, cap(buf)>>20)
	}
	// A big frame, then a small one: the big buffer is not kept.
	var in []byte
	for _, n := range []int{8 << 20, 10} {
		b, at := beginFrame(nil, kindResponse, 1)
		in = append(in, endFrame(append(b, make([]byte, n)...), at)...)
	}
	r := bufio.NewReader(bytes.NewReader(in))
	buf = nil
	for range 2 {
		if _, buf, err = readFrame(r, buf); err != nil {
			t.Fatal(err)
		}
	}
	if cap(buf) > maxKeptBuffer {
		t.Errorf("after a small frame the link still holds a %d MiB buffer", cap(buf)>>20)
	}
}

// An entry of a type raft does not know is refused at decoding: raft would
// panic when it committed it.
func TestUnknownEntryTypeIsRefused(t *testing.T) {
	req := &raft.AppendEntriesRequest{Term: 3, Leader: []byte("a"), Entries: []*raft.Log{{Index: 1, Term: 3, Type: raft.LogCommand, Data: []byte("x")}}}
	for _, typ := range []raft.LogType{raft.LogCommand, raft.LogBarrier, raft.LogConfiguration, raft.LogConfiguration + 1, 255} {
		req.Entries[0].Type = typ
		if typ == raft.LogConfiguration { // a configuration raft decodes (TestUndecodableConfigurationIsRefused)
			req.Entries[0].Data = raft.EncodeConfiguration(raft.Configuration{})
		}
		b, rpc, err := appendRequest(nil, 1, "g", req)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parseFrame(b[4:])
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeRequest(rpc, f.body)
		if known := typ <= raft.LogConfiguration; known != (err == nil) {
			t.Errorf("entry type %d: decode error %v", typ, err)
		}
	}
}

// A snapshot connection whose peer says nothing after its hello is closed
// after the timeout, not held until the network closes.
func TestSilentSnapshotConnectionIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		a, _ := bareNet(t, pn, "a", time.Second)
		_, bAddr := bareNet(t, pn, "b", time.Second)
		conn, err := a.dial(bAddr, useSnapshot)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		_ = conn.SetReadDeadline(start.Add(time.Minute))
		if _, err := conn.Read(make([]byte, 1)); err == nil || time.Since(start) > time.Second {
			t.Errorf("read %v after %v: want the connection closed after b's timeout (1s)", err, time.Since(start))
		}
	})
}

// A session stopped while its group's raft has not taken its calls (the
// group closed and opened again) answers them with an error at once.
func TestStoppedSessionAnswersItsCalls(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w := newWriter(a, 5*time.Second)
	defer w.close(net.ErrClosed)
	tr := &Transport{consumer: make(chan raft.RPC), closed: make(chan struct{})} // raft takes nothing
	s := newSession(tr, w)
	for id := uint64(1); id <= 3; id++ {
		s.submit(id, &raft.RequestVoteRequest{Term: id})
	}
	go s.close()
	r := bufio.NewReader(b)
	for id := uint64(1); id <= 3; id++ {
		_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
		f, _, err := readFrame(r, nil)
		if err != nil {
			t.Fatalf("call %d: no answer: %v", id, err)
		}
		if f.id != id || f.kind != kindError {
			t.Errorf("answer %d: kind %d for call %d, want an error for call %d", id, f.kind, f.id, id)
		}
	}
}
