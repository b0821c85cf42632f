package rpc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/backup"
	"github.com/floodgate/floodgate/fsm"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
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

// shortLimit is floodgatectl allow KEY --limit 1 --window 1s.
var shortLimit = &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1, WindowMs: 1000}

func allowShort(t *testing.T, n *inproc.Node, key string) bool {
	t.Helper()
	resp, err := n.Limiter().Allow(context.Background(), &pb.AllowRequest{Key: key, Limit: shortLimit})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Allowed
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
