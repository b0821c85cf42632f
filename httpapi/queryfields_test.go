package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// validatingLimiter refuses an inline limit as a node does (its field
// names are the API's).
type validatingLimiter struct{ fakeLimiter }

func (v *validatingLimiter) Allow(ctx context.Context, r *pb.AllowRequest) (*pb.AllowResponse, error) {
	if r.Limit != nil {
		if _, err := validate.Limit(r.Limit, "limit.", window.DefaultMaxLogLength); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	return v.fakeLimiter.Allow(ctx, r)
}

// GET /api/v1/limit names a refused inline limit's fields as the query
// parameters that gave them (window, limit, burst), not as the API's
// fields (limit.window_ms, limit.limit, limit.burst), and its window as
// the duration given, not in milliseconds.
func TestQueryErrorsNameTheParameters(t *testing.T) {
	s := serve(t, &validatingLimiter{fakeLimiter{limit: 9}}, Draft)
	for query, want := range map[string]string{
		"key=k&limit=0&window=1m":                                 "invalid request: limit: must be between 1 and",
		"key=k&limit=20000&window=1m":                             "invalid request: limit: a sliding_log keeps one timestamp",
		"key=k&limit=5&window=1m&algorithm=token_bucket&burst=-1": "invalid request: burst: must be between 0 and",
		"key=k&limit=5&window=0s":                                 `window: "0s" must be more than 0 and at most a year`,
		"key=k&limit=5&window=9000h":                              `window: "9000h" must be more than 0 and at most a year (8784h0m0s)`,
	} {
		resp, body := get(t, s.URL+"/api/v1/limit?"+query)
		var e errorBody
		_ = json.Unmarshal([]byte(body), &e)
		if msg := e.Error.Message; resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg, want) ||
			strings.Contains(msg, "window_ms") || strings.Contains(msg, "limit.limit") {
			t.Errorf("%s: %d %s, want 400 containing %q", query, resp.StatusCode, body, want)
		}
	}
}
