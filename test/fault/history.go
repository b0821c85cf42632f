package fault

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// Outcome is what a recorded call is known to have done.
type Outcome int

// Outcomes of a call.
const (
	// Allowed: answered allowed (its cost counted).
	Allowed Outcome = iota
	// Denied: answered denied (nothing counted).
	Denied
	// Unknown: failed after it may have reached the cluster (error,
	// timeout); it may or may not have counted.
	Unknown
)

func (o Outcome) String() string {
	return [...]string{"allowed", "denied", "unknown"}[o]
}

// Op is one recorded call on a key. Times are offsets from the start of
// the history, taken before the call was sent and after it returned.
type Op struct {
	Client    int    // recording worker, for reports and visualizations
	Via       string // "sdk" or the node a raw client is pinned to
	Key       string
	Cost      int64 // 0 is a peek
	Call, Ret time.Duration
	Outcome   Outcome
	Remaining int64 // when answered
	Err       string
	Invalid   bool // refused as InvalidArgument: every request sent is valid
}

func (o Op) String() string {
	s := fmt.Sprintf("client %d via %s: %s cost %d [%s, %s] %s", o.Client, o.Via, o.Key, o.Cost,
		o.Call.Round(time.Millisecond), o.Ret.Round(time.Millisecond), o.Outcome)
	if o.Outcome == Unknown {
		return s + " (" + o.Err + ")"
	}
	return fmt.Sprintf("%s, remaining %d", s, o.Remaining)
}

// History records calls and faults from many goroutines.
type History struct {
	start   time.Time
	mu      sync.Mutex
	ops     []Op
	notSent int // calls refused while dialing: they never reached a node
	refused int // calls a starting node refused
	faults  []Fault
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{start: time.Now()} }

// Restart makes now the start of the history; it must hold nothing yet.
func (h *History) Restart() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start = time.Now()
}

// Since is the offset of now from the start of the history.
func (h *History) Since() time.Duration { return time.Since(h.start) }

// Caller sends one check; Via names it in reports.
type Caller struct {
	Via   string
	Allow func(context.Context, *pb.AllowRequest) (*pb.AllowResponse, error)
	// Up, if set, says whether sending is worthwhile: a raw client pinned
	// to a killed node waits instead of piling up refused dials.
	Up func() bool
}

// Do sends req through c, records the call and returns its outcome.
func (h *History) Do(ctx context.Context, client int, c Caller, req *pb.AllowRequest, timeout time.Duration) Op {
	op := Op{Client: client, Via: c.Via, Key: req.Key, Cost: req.GetCost(), Call: h.Since()}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	resp, err := c.Allow(cctx, req)
	cancel()
	op.Ret = h.Since()
	switch {
	case err == nil && resp.Allowed:
		op.Outcome, op.Remaining = Allowed, resp.Remaining
	case err == nil:
		op.Outcome, op.Remaining = Denied, resp.Remaining
	default:
		op.Outcome, op.Err = Unknown, shortErr(err)
		op.Invalid = status.Code(err) == codes.InvalidArgument
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
	case neverSent(err):
		// The connection could not even be dialed: nothing reached a
		// node, so the call is known not to have counted.
		h.notSent++
		return op
	case notReady(err):
		// A starting node refuses every check before looking at it. Left
		// out of the history, such a call can only make the checks
		// stricter: were it counted after all, the count would show up
		// unexplained.
		h.refused++
		return op
	}
	h.ops = append(h.ops, op)
	return op
}

// neverSent reports whether err is gRPC's failure to set up the
// connection: to dial, or to read the server's HTTP/2 preface. grpc-go
// sends a call only on a connection whose handshake completed, so either
// happens before any byte of the request is written.
func neverSent(err error) bool {
	msg := err.Error()
	return status.Code(err) == codes.Unavailable &&
		(strings.Contains(msg, "Error while dialing") || strings.Contains(msg, "error reading server preface"))
}

// notReady reports whether err is a starting node's refusal (rpc.Server's
// ready check, cluster.ErrNotReady): the check was not looked at. The
// message is all the API gives to tell it apart from an Unavailable whose
// outcome is unknown.
func notReady(err error) bool {
	return status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "node not part of a cluster yet")
}

func shortErr(err error) string {
	s := status.Convert(err)
	msg := s.Message()
	if len(msg) > 120 {
		msg = msg[:120] + "…"
	}
	return s.Code().String() + ": " + msg
}

// Ops returns the recorded calls, ordered by invocation.
func (h *History) Ops() []Op {
	h.mu.Lock()
	out := append([]Op(nil), h.ops...)
	h.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// NotSent is how many calls failed to dial (left out of the history).
func (h *History) NotSent() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.notSent
}

// Refused is how many calls a starting node refused (left out of the
// history).
func (h *History) Refused() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

// ByKey splits ops by key.
func ByKey(ops []Op) map[string][]Op {
	out := map[string][]Op{}
	for _, o := range ops {
		out[o.Key] = append(out[o.Key], o)
	}
	return out
}
