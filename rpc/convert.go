package rpc

import (
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// parseCheck validates one request and turns it into the check a shard log
// entry carries; field prefixes error messages.
func parseCheck(req *pb.AllowRequest, field string, maxLog int64) (fsm.Check, error) {
	c, err := validate.Request(req, field, maxLog)
	if err != nil {
		return fsm.Check{}, err
	}
	return fsm.Check{Key: c.Key, Policy: c.Policy, Cost: c.Cost}, nil
}

// resultToProto converts a decision; times become Unix milliseconds, a
// retry-after rounded up so a client that waits exactly that long is in time.
func resultToProto(r policy.Result) *pb.AllowResponse {
	ms := int64(time.Millisecond)
	return &pb.AllowResponse{
		Allowed:      r.Allowed,
		Limit:        r.Limit,
		Remaining:    r.Remaining,
		ResetAtMs:    (r.ResetAt + ms - 1) / ms,
		RetryAfterMs: (r.RetryAfter + ms - 1) / ms,
	}
}
