package policyfile

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
	"github.com/floodgate/floodgate/window"
)

// Check validates policies as the server would store them together, with
// the sliding-log cap of a node's --max-log-length: maxLog, 0 for its
// default (window.DefaultMaxLogLength), window.MaxLogLength to leave it to
// the node. Errors name the field as the file spells it.
func Check(policies []*pb.Policy, maxLog int64) error {
	_, err := Validate(policies, maxLog)
	return err
}

// Validate is Check that also returns the policies as the server stores
// them (a node's --policies file).
func Validate(policies []*pb.Policy, maxLog int64) ([]*policy.Policy, error) {
	if err := checkWindows(policies); err != nil {
		return nil, err
	}
	ps, err := validate.Policies(policies, maxLog)
	if err != nil {
		return nil, inFile(err)
	}
	return ps, nil
}

// checkWindows checks the windows of policies' limits in the file's terms
// (a Go duration) before the server's rules do in milliseconds.
func checkWindows(policies []*pb.Policy) error {
	check := func(l *pb.PolicyLimit, field string) error {
		if l == nil || l.Limit == nil || l.Limit.Calendar != pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED {
			return nil // the server's to refuse
		}
		var msg string
		switch ms, most := l.Limit.WindowMs, window.MaxWindow/int64(time.Millisecond); {
		case ms == 0:
			msg = "missing or 0: give a Go duration (1m, 24h) or a calendar unit (" + strings.Join(calendarNames, ", ") + ")"
		case ms > most:
			msg = fmt.Sprintf("%s is more than a year (%s)", formatWindow(ms), formatWindow(most))
		default:
			return nil
		}
		return &fileError{msg: field + "window: " + msg, err: validate.ErrInvalid}
	}
	for i, p := range policies {
		for j, l := range p.GetLimits() {
			if err := check(l, fmt.Sprintf("policies[%d].limits[%d].", i, j)); err != nil {
				return err
			}
		}
		if err := check(p.GetReduced(), fmt.Sprintf("policies[%d].reduced.", i)); err != nil {
			return err
		}
	}
	return nil
}

// fileError is a validation error whose field path is the file's; it
// unwraps to the server's error (validate.ErrInvalid).
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }

// inFile is err, a server validation error, as the file spells it
// (FileFields), without the server's "invalid request" in front.
func inFile(err error) error {
	msg := strings.TrimPrefix(err.Error(), validate.ErrInvalid.Error()+": ")
	return &fileError{msg: FileFields(msg), err: err}
}

// apiLimitField matches a limit's field in a policy as the API spells it:
// under "limit", its window in milliseconds.
var apiLimitField = regexp.MustCompile(`(policies\[\d+\]\.(?:limits\[\d+\]|reduced))\.limit\.(\w+)`)

// FileFields spells the policy fields msg names (a server's refusal of
// policies) as a policy file does: the API puts a limit's fields under
// "limit" and its window in milliseconds
// ("policies[0].limits[1].limit.window_ms"), a file directly in the limit
// ("policies[0].limits[1].window").
func FileFields(msg string) string {
	return apiLimitField.ReplaceAllStringFunc(msg, func(m string) string {
		sub := apiLimitField.FindStringSubmatch(m)
		return sub[1] + "." + validate.HandField(sub[2])
	})
}
