package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/cluster/hashing"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// bin holds the binaries built once for all tests.
var bin Binaries

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(orphanEnv) != "" {
		runOrphanHelper() // TestNodesDieWithTheHarness's helper process
	}
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "floodgate-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, err = Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startCluster starts an n-node cluster for t and stops it when t ends,
// printing the nodes' logs if t failed.
func startCluster(t *testing.T, n int, args ...string) *Cluster {
	t.Helper()
	return startSecureCluster(t, n, nil, args...)
}

// startSecureCluster is startCluster for nodes the test reaches with dial.
func startSecureCluster(t *testing.T, n int, dial []grpc.DialOption, args ...string) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := StartSecureCluster(ctx, bin, t.TempDir(), n, dial, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs(40))
		}
		c.Close()
	})
	return c
}

// groupOf returns the group (a legacy cluster: the shard) that owns key
// in st.
func groupOf(st *pb.StatusResponse, key string) int {
	slot := hashing.ShardOf(key, int(st.Shards))
	for _, r := range st.SlotTable {
		if slot >= int(r.First) && slot < int(r.First+r.Count) {
			return int(r.Group)
		}
	}
	return slot
}

// keysInShard returns n keys owned by group (shard) in st.
func keysInShard(st *pb.StatusResponse, prefix string, group, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if groupOf(st, k) == group {
			keys = append(keys, k)
		}
	}
	return keys
}

// oneKeyPerShard returns a key in each group (shard) of st, in the order
// of st.ShardStatus.
func oneKeyPerShard(st *pb.StatusResponse, prefix string) []string {
	at := map[int]int{}
	for i, s := range st.ShardStatus {
		at[int(s.Id)] = i
	}
	keys := make([]string, len(st.ShardStatus))
	found := 0
	for i := 0; found < len(keys); i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if j, ok := at[groupOf(st, k)]; ok && keys[j] == "" {
			keys[j] = k
			found++
		}
	}
	return keys
}

func slidingLog(limit int64, window time.Duration) *pb.Limit {
	return &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: limit, WindowMs: window.Milliseconds()}
}

func cost(c int64) *int64 { return &c }
