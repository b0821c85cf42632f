package policy

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/floodgate/floodgate/window"
)

// Validate reports why p can never be evaluated, naming the field: "name",
// "limits[1].window", "reduced.limit", "soft_percent", "key_by[0]", ...
// maxLog caps sliding logs (window.DefaultMaxLogLength when 0).
func (p *Policy) Validate(maxLog int64) error {
	if len(p.Name) > MaxNameLen || p.Name != "" && !ValidName(p.Name) {
		return invalid("name", "%s must be 1 to %d letters, digits or _.:-", quoteName(p.Name), MaxNameLen)
	}
	if len(p.Limits) == 0 {
		return invalid("limits", "a policy needs at least one limit")
	}
	if len(p.Limits) > MaxLimits {
		return invalid("limits", "at most %d limits, got %d", MaxLimits, len(p.Limits))
	}
	for i := range p.Limits {
		// The path is spelled only for an error: Validate runs on every
		// policy a log entry or a forward carries.
		if err := validateLimit(&p.Limits[i], "", maxLog); err != nil {
			return within(fmt.Sprintf("limits[%d].", i), err)
		}
		for j := 0; j < i; j++ {
			if sameWindow(&p.Limits[i].Limit, &p.Limits[j].Limit) {
				return invalid(fmt.Sprintf("limits[%d].window", i), "duplicates the window of limits[%d]", j)
			}
			if n := p.Limits[i].Name; n != "" && n == p.Limits[j].Name {
				return invalid(fmt.Sprintf("limits[%d].name", i), "duplicates the name of limits[%d]", j)
			}
		}
	}
	if p.Reduced != nil {
		if err := validateLimit(p.Reduced, "reduced.", maxLog); err != nil {
			return err
		}
	}
	if err := p.validateMode(); err != nil {
		return err
	}
	if err := p.validateStretchedLogs(maxLog); err != nil {
		return err
	}
	if p.Consistency > Fast {
		return invalid("consistency", "unknown consistency %d", p.Consistency)
	}
	if len(p.KeyBy) > MaxKeyBy {
		return invalid("key_by", "at most %d descriptors, got %d", MaxKeyBy, len(p.KeyBy))
	}
	for i, d := range p.KeyBy {
		if len(d) > MaxNameLen || !ValidName(d) {
			return invalid(fmt.Sprintf("key_by[%d]", i), "%s must be 1 to %d letters, digits or _.:-", quoteName(d), MaxNameLen)
		}
		for j := 0; j < i; j++ {
			if p.KeyBy[j] == d {
				return invalid(fmt.Sprintf("key_by[%d]", i), "%q is listed twice", d)
			}
		}
	}
	return nil
}

func (p *Policy) validateMode() error {
	if p.Mode != Soft && p.SoftPercent != 0 {
		return invalid("soft_percent", "only a soft policy exceeds its limits")
	}
	if p.Mode != Elastic && (p.ElasticCeilingPercent != 0 || p.ElasticCapacity != 0) {
		return invalid("elastic", "only an elastic policy has a ceiling and a capacity")
	}
	switch p.Mode {
	case Hard, Shadow:
	case Soft:
		if p.SoftPercent < 1 || p.SoftPercent > MaxSoftPercent {
			return invalid("soft_percent", "must be between 1 and %d, got %d", MaxSoftPercent, p.SoftPercent)
		}
	case Elastic:
		if p.ElasticCeilingPercent <= 100 || p.ElasticCeilingPercent > 100+MaxSoftPercent {
			return invalid("elastic.ceiling_percent", "must be more than 100 and at most %d, got %d", 100+MaxSoftPercent, p.ElasticCeilingPercent)
		}
		if p.ElasticCapacity <= 0 || p.ElasticCapacity > window.MaxLimit {
			return invalid("elastic.capacity", "must be between 1 and %d requests per second, got %d", window.MaxLimit, p.ElasticCapacity)
		}
	default:
		return invalid("mode", "unknown mode %d", p.Mode)
	}
	return nil
}

// validateStretchedLogs checks the cap on sliding logs at the most a soft
// or elastic policy stretches them: a log holds one timestamp per unit of
// its stretched limit.
func (p *Policy) validateStretchedLogs(maxLog int64) error {
	if maxLog <= 0 {
		maxLog = window.DefaultMaxLogLength
	}
	pct := p.stretch(true)
	if pct == 100 {
		return nil
	}
	for i := range p.Limits {
		l := &p.Limits[i].Limit
		if n := scaled(l, pct).Limit; l.Algorithm == window.SlidingLog && n > maxLog {
			return invalid(fmt.Sprintf("limits[%d].limit", i), "a sliding_log keeps one timestamp per request and is capped at %d; stretched to %d%% this one holds %d, use sliding_counter", maxLog, pct, n)
		}
	}
	return nil
}

func validateLimit(l *Limit, path string, maxLog int64) error {
	if len(l.Name) > MaxNameLen || l.Name != "" && !ValidName(l.Name) {
		return invalid(path+"name", "%s must be 1 to %d letters, digits or _.:-", quoteName(l.Name), MaxNameLen)
	}
	if err := l.Limit.Validate(maxLog); err != nil {
		return within(path, err)
	}
	return nil
}

// ValidateCost reports why cost can never be admitted by p: negative, or
// more than one of its limits admits at once (so it would be denied
// forever, even stretched by soft or elastic throttling).
func (p *Policy) ValidateCost(cost int64) error {
	for i := range p.Limits {
		l := scaled(&p.Limits[i].Limit, max(100, p.stretch(true)))
		if err := l.ValidateCost(cost); err != nil {
			var fe *window.FieldError
			if len(p.Limits) > 1 && errors.As(err, &fe) {
				return invalid(fe.Field, "%s (limits[%d])", fe.Msg, i)
			}
			return err
		}
	}
	return nil
}

// sameWindow reports whether two limits count over the same window, which
// would make one of them redundant.
func sameWindow(a, b *window.Limit) bool {
	return a.Window == b.Window && a.Calendar == b.Calendar
}

// ValidName reports whether s is a non-empty run of letters, digits and
// _.:- (no separators, so names never collide inside state identities or
// composed keys).
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

func invalid(field, format string, args ...any) error {
	return &window.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// within prefixes the field of a validation error with path.
func within(path string, err error) error {
	var fe *window.FieldError
	if errors.As(err, &fe) {
		return &window.FieldError{Field: path + fe.Field, Msg: fe.Msg}
	}
	return err
}

// quoteName quotes a name for an error message, or only says how long it
// is when it is too long to be one: an error never echoes a megabyte.
func quoteName(s string) string {
	if len(s) > MaxNameLen {
		return fmt.Sprintf("a name of %d bytes", len(s))
	}
	return strconv.Quote(s)
}
