package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
)

// kind says which target of the issue a workload is judged by.
type kind int

const (
	info       kind = iota // no target: reported with its ratio to health
	strict                 // single strict Allow
	fast                   // single fast Allow
	batchKind              // strict AllowBatch decisions
	heldStrict             // strict p99 at a held rate
	heldFast               // fast p99 at a held rate
)

// fastPolicy is the fast-consistency policy the fast workloads name; the
// bench creates it through the Admin API.
const fastPolicy = "bench-fast"

// workload is one kind of check traffic, sent by ghz and by the Go SDK.
type workload struct {
	name   string
	limit  *pb.Limit // inline limit (strict), or nil with policy
	policy string
	batch  int // checks per AllowBatch call; 0 for single Allow calls
	rps    int // held rate in calls/s; 0: as fast as answered
	kind   kind
}

// Inline limits of the strict workloads: generous, so that most checks are
// admitted and counted (the costly path).
var (
	slidingLog  = &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1000, WindowMs: 1000}
	tokenBucket = &pb.Limit{Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 1000, WindowMs: 60_000, Burst: 100}
)

// workloads are the check workloads of the targets, in table order.
func workloads(batch, heldRate int) []workload {
	return []workload{
		{name: "Allow, strict, inline sliding log", limit: slidingLog, kind: strict},
		{name: "Allow, strict, inline token bucket", limit: tokenBucket, kind: strict},
		{name: "Allow, fast policy (sliding log)", policy: fastPolicy, kind: fast},
		{name: fmt.Sprintf("AllowBatch of %d, strict", batch), limit: slidingLog, batch: batch, kind: batchKind},
		{name: fmt.Sprintf("AllowBatch of %d, fast", batch), policy: fastPolicy, batch: batch, kind: info},
		{name: fmt.Sprintf("strict at a held %s calls/s", thousands(float64(heldRate))), limit: slidingLog, rps: heldRate, kind: heldStrict},
		{name: fmt.Sprintf("fast at a held %s calls/s", thousands(float64(heldRate))), policy: fastPolicy, rps: heldRate, kind: heldFast},
	}
}

// judge makes the table row of res, measured by client against health.
func (w workload) judge(client string, res, health *result) row {
	switch w.kind {
	case strict:
		return rateRow(w.name, client, res, health, targetStrict)
	case fast:
		return rateRow(w.name, client, res, health, targetFast)
	case batchKind:
		return batchRow(w.name, client, res, health, targetBatch)
	case heldStrict:
		return heldRow(w.name, client, res, health, w.rps, targetHeldStrict)
	case heldFast:
		return heldRow(w.name, client, res, health, w.rps, targetHeldFast)
	}
	if w.batch > 0 {
		return batchRow(w.name, client, res, health, 0)
	}
	return rateRow(w.name, client, res, health, 0)
}

// request is one check of w on key.
func (w workload) request(key string) *pb.AllowRequest {
	return &pb.AllowRequest{Key: key, Limit: w.limit, Policy: w.policy}
}

// ghzChecks is how many checks the request file of a ghz workload holds;
// ghz sends them in turn, round and round.
const ghzChecks = 20_000

// ghz is w as a ghz call: its requests, written into dir, carry keys drawn
// at random among keys once, here, rather than by a template ghz would
// execute and parse on every call (a cost of the client, which shares the
// machine's two cores with the nodes, that the health check does not pay).
func (w workload) ghz(keys int, dir string) (ghzRun, error) {
	r := rand.New(rand.NewPCG(uint64(keys), uint64(w.batch)))
	key := func() string { return fmt.Sprintf("bench:%d", r.IntN(keys)) }
	size := max(w.batch, 1)
	msgs := make([]json.RawMessage, (ghzChecks+size-1)/size)
	for i := range msgs {
		items := make([]json.RawMessage, size)
		for j := range items {
			one, err := protojson.Marshal(w.request(key()))
			if err != nil {
				return ghzRun{}, err
			}
			items[j] = one
		}
		msgs[i] = items[0]
		if w.batch > 0 {
			b, err := json.Marshal(map[string]any{"requests": items})
			if err != nil {
				return ghzRun{}, err
			}
			msgs[i] = b
		}
	}
	data, err := json.Marshal(msgs)
	if err != nil {
		return ghzRun{}, err
	}
	sum := sha256.Sum256(data)
	file := filepath.Join(dir, fmt.Sprintf("ghz-requests-%x.json", sum[:8]))
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return ghzRun{}, err
	}
	call := "floodgate.v1.RateLimiter/Allow"
	if w.batch > 0 {
		call = "floodgate.v1.RateLimiter/AllowBatch"
	}
	return ghzRun{call: call, dataFile: file, rps: w.rps, decisions: size}, nil
}

// sdk is w as calls through the Go SDK on random keys among keys.
func (w workload) sdk(cl *client.Client, keys int) op {
	key := func(r *rand.Rand) string { return fmt.Sprintf("bench:%d", r.IntN(keys)) }
	if w.batch == 0 {
		return func(_ int, r *rand.Rand) (int, error) {
			_, err := cl.Allow(context.Background(), w.request(key(r)))
			return 1, err
		}
	}
	return func(_ int, r *rand.Rand) (int, error) {
		reqs := make([]*pb.AllowRequest, w.batch)
		for i := range reqs {
			reqs[i] = w.request(key(r))
		}
		resp, err := cl.AllowBatch(context.Background(), reqs)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, it := range resp.Results {
			if it.Error == nil {
				n++
			}
		}
		if n == 0 && len(resp.Results) > 0 {
			return 0, fmt.Errorf("every item failed, first: %s", resp.Results[0].Error.GetMessage())
		}
		return n, nil
	}
}

// measureSDK runs w through the SDK: closed loop, or held at w.rps.
func (w workload) measureSDK(cl *client.Client, keys, clients int, duration, warmup time.Duration) *result {
	if w.rps > 0 {
		return measureRate(clients, w.rps, duration, warmup, w.sdk(cl, keys))
	}
	return measure(clients, duration, warmup, w.sdk(cl, keys))
}

// checkOnce sends one check of w to a node through its plain gRPC client,
// so that a payload the node refuses fails the bench before a whole run
// of errors.
func (w workload) checkOnce(ctx context.Context, lim pb.RateLimiterClient) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if w.batch == 0 {
		_, err := lim.Allow(ctx, w.request("bench:probe"))
		return err
	}
	reqs := make([]*pb.AllowRequest, w.batch)
	for i := range reqs {
		reqs[i] = w.request(fmt.Sprintf("bench:probe-%d", i))
	}
	resp, err := lim.AllowBatch(ctx, &pb.AllowBatchRequest{Requests: reqs})
	if err != nil {
		return err
	}
	var bad []string
	for i, it := range resp.Results {
		if it.Error != nil {
			bad = append(bad, fmt.Sprintf("%d: %s", i, it.Error.GetMessage()))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d items failed: %s", len(bad), len(reqs), strings.Join(bad[:min(3, len(bad))], "; "))
	}
	return nil
}
