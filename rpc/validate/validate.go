package validate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/window"
)

// Errors.
var (
	// ErrInvalid marks a request that can never succeed; the message names
	// the field.
	ErrInvalid = errors.New("invalid request")
)

// KeyedByDescriptors is in the message refusing a plain key for a policy
// with key_by: the SDK, which may not know the policy yet, learns it and
// asks again with descriptors when it reads this, and only then.
const KeyedByDescriptors = "builds its keys from descriptors"

// Request bounds.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 1024
	// MaxBatch is the most checks in one AllowBatch call.
	MaxBatch = 1000
	// MaxDescriptors is the most descriptors one request may carry; with
	// names and values they must still fit in MaxKeyLen.
	MaxDescriptors = 32
)

// Check is a validated request: the key, the policy to apply and the cost.
type Check struct {
	Key    string
	Policy *policy.Policy
	Cost   int64
}

// Resolver finds a named policy: nil when it surely does not exist, or an
// error when that cannot be told now (the node is catching up), which
// must not be reported as a bad request.
type Resolver func(name string) (*policy.Policy, error)

// Request validates one request. field prefixes error messages
// ("requests[3]." in a batch) so they name the field exactly; maxLog caps
// sliding logs (window.DefaultMaxLogLength when 0). resolve looks named
// policies up; without one (the SDK, which does not know them) a request
// naming a policy is checked as far as it can be, and its Check has a nil
// Policy. inline, when not nil, shares one policy among the requests of a
// batch that give equal inline limits.
func Request(req *pb.AllowRequest, field string, maxLog int64, resolve Resolver, inline *Inline) (Check, error) {
	if req == nil {
		name := trimDot(field)
		if name == "" { // a lone request (the Go SDK's Allow of nil)
			name = "request"
		}
		return Check{}, fmt.Errorf("%w: %s: missing", ErrInvalid, name)
	}
	p, err := requestPolicy(req.Policy, req.Limit, field, maxLog, resolve, inline)
	if err != nil {
		return Check{}, err
	}
	key, err := Key(req.Key, req.Descriptors, p, field)
	if err != nil {
		return Check{}, err
	}
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	if p != nil {
		if err := p.ValidateCost(cost); err != nil {
			return Check{}, AtField(field, err)
		}
	} else if cost < 0 {
		return Check{}, fmt.Errorf("%w: %scost: must not be negative, got %d", ErrInvalid, field, cost)
	}
	return Check{Key: key, Policy: p, Cost: cost}, nil
}

// Elem is the prefix of the fields of element i of list in error messages:
// Elem("requests", 3) is "requests[3].". Built for every element of a
// batch, so it does without fmt.
func Elem(list string, i int) string { return list + "[" + strconv.Itoa(i) + "]." }

// requestPolicy finds the policy of a request: named, or inline.
func requestPolicy(name string, limit *pb.Limit, field string, maxLog int64, resolve Resolver, inline *Inline) (*policy.Policy, error) {
	switch {
	case name != "" && limit != nil:
		return nil, fmt.Errorf("%w: %slimit: give either a policy or an inline limit, not both", ErrInvalid, field)
	case name != "":
		if err := PolicyName(field+"policy", name); err != nil {
			return nil, err
		}
		if resolve == nil {
			return nil, nil
		}
		p, err := resolve(name)
		if err != nil {
			return nil, err
		}
		if p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("%w: %spolicy: unknown policy %q", ErrInvalid, field, name)
	}
	l, err := Limit(limit, field+"limit.", maxLog)
	if err != nil {
		return nil, err
	}
	return inline.Policy(l), nil
}

// Key returns the key a request is counted under: key itself, or built
// from descriptors ("ip=10.0.0.1,user=42") in p's key_by order or sorted
// by name. Names are letters, digits and _.:-; in values, ',', '=' and '\'
// are escaped with a backslash, so different descriptors never make the
// same key.
func Key(key string, descriptors map[string]string, p *policy.Policy, field string) (string, error) {
	return keyOf(key, descriptors, p, field, "descriptors", false)
}

// EntriesKey is Key for the entries of an Envoy rate limit descriptor,
// whose errors name them as RLS does: "descriptors[0].entries".
func EntriesKey(entries map[string]string, p *policy.Policy, field string) (string, error) {
	return keyOf("", entries, p, field, "entries", false)
}

// DigestedEntriesKey is EntriesKey, but a key the entries make that is
// longer than MaxKeyLen is counted under its SHA-256, "sha256:<hex>",
// instead of refused: Envoy sends what a proxied request carries, and a
// refusal would let the request through under failure_mode_deny: false.
func DigestedEntriesKey(entries map[string]string, p *policy.Policy, field string) (string, error) {
	return keyOf("", entries, p, field, "entries", true)
}

// keyOf is Key with descField the name its errors give the descriptors;
// digestLong digests a key of descriptors too long to count under.
func keyOf(key string, descriptors map[string]string, p *policy.Policy, field, descField string, digestLong bool) (string, error) {
	descs := field + descField
	var keyBy []string
	if p != nil {
		keyBy = p.KeyBy
	}
	switch {
	case key != "" && len(descriptors) > 0:
		return "", fmt.Errorf("%w: %s: give either a key or descriptors, not both", ErrInvalid, descs)
	case len(keyBy) > 0 && key != "":
		return "", fmt.Errorf("%w: %skey: policy %s %s %s", ErrInvalid, field, p.Name, KeyedByDescriptors, strings.Join(keyBy, ", "))
	case len(descriptors) > 0:
		if err := checkDescriptors(descriptors, descs); err != nil {
			return "", err
		}
		names := keyBy
		if len(names) == 0 {
			names = slices.Sorted(maps.Keys(descriptors))
		}
		var b strings.Builder
		for i, name := range names {
			v, ok := descriptors[name]
			if !ok {
				return "", fmt.Errorf("%w: %s: missing %q (policy %s keys by %s)", ErrInvalid, descs, name, p.Name, strings.Join(keyBy, ", "))
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(name)
			b.WriteByte('=')
			for j := 0; j < len(v); j++ {
				if c := v[j]; c == ',' || c == '=' || c == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(v[j])
			}
		}
		if len(descriptors) > len(names) {
			for name := range descriptors {
				if !slices.Contains(names, name) {
					return "", fmt.Errorf("%w: %s.%s: policy %s keys by %s only", ErrInvalid, descs, name, p.Name, strings.Join(keyBy, ", "))
				}
			}
		}
		key = b.String()
		switch {
		case len(key) <= MaxKeyLen:
		case digestLong:
			sum := sha256.Sum256([]byte(key))
			key = "sha256:" + hex.EncodeToString(sum[:])
		default:
			return "", fmt.Errorf("%w: %s: the key they make is %d bytes, longer than %d", ErrInvalid, descs, len(key), MaxKeyLen)
		}
	}
	if err := checkKey(key, field); err != nil {
		return "", err
	}
	return p.ColocatedKey(key), nil
}

// checkKey checks a key as a client's request gives it (or its
// descriptors make it).
func checkKey(key, field string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: %skey: must not be empty", ErrInvalid, field)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %skey: %d bytes is longer than %d", ErrInvalid, field, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		// gRPC refuses it on decoding; the HTTP API and the SDK's local
		// checks come here with it, and an answer could not carry it.
		return fmt.Errorf("%w: %skey: must be valid UTF-8", ErrInvalid, field)
	case key[0] == 0:
		// Reserved for the hash tag of colocated policies' keys.
		return fmt.Errorf("%w: %skey: must not start with a NUL byte", ErrInvalid, field)
	}
	return nil
}

// StoredKey checks a key as node-to-node calls carry it, to be counted
// under p: one a client's request could have made, behind p's hash tag
// exactly when p colocates its keys. A peer is held to a client's rules:
// an untagged key of a colocated policy, or one tagged as another
// policy's, would be counted where no client's check of it is.
func StoredKey(key string, p *policy.Policy, field string) error {
	user, ok := p.UserKey(key)
	if !ok {
		return fmt.Errorf("%w: %skey: policy %s colocates its keys, and this key lacks its hash tag", ErrInvalid, field, p.Name)
	}
	return checkKey(user, field)
}

// MaxStoredKeyLen is the longest key a node counts under: MaxKeyLen and a
// colocated policy's hash tag (policy.ColocatedKey). Node-to-node calls
// carry keys as stored.
const MaxStoredKeyLen = MaxKeyLen + policy.MaxNameLen + 2

// checkDescriptors bounds descriptors and checks their names, in name
// order so the same request always gets the same answer. A name too long
// to be one is not echoed back: the message stays readable.
func checkDescriptors(descriptors map[string]string, descs string) error {
	if len(descriptors) > MaxDescriptors {
		return fmt.Errorf("%w: %s: %d given, at most %d", ErrInvalid, descs, len(descriptors), MaxDescriptors)
	}
	for _, name := range slices.Sorted(maps.Keys(descriptors)) {
		switch {
		case len(name) > MaxKeyLen:
			return fmt.Errorf("%w: %s: a name of %d bytes is longer than %d", ErrInvalid, descs, len(name), MaxKeyLen)
		case !policy.ValidName(name):
			return fmt.Errorf("%w: %s: name %q must be letters, digits or _.:-", ErrInvalid, descs, name)
		case len(descriptors[name]) > MaxKeyLen:
			return fmt.Errorf("%w: %s.%s: %d bytes is longer than %d", ErrInvalid, descs, name, len(descriptors[name]), MaxKeyLen)
		case !utf8.ValidString(descriptors[name]):
			return fmt.Errorf("%w: %s.%s: must be valid UTF-8", ErrInvalid, descs, name)
		}
	}
	return nil
}

// Batch validates the size of a batch.
func Batch(n int) error {
	if n > MaxBatch {
		return fmt.Errorf("%w: requests: %d checks is more than %d", ErrInvalid, n, MaxBatch)
	}
	return nil
}

// Limit validates a proto Limit and converts it; field prefixes errors.
func Limit(pl *pb.Limit, field string, maxLog int64) (window.Limit, error) {
	if pl == nil {
		return window.Limit{}, fmt.Errorf("%w: %s: required", ErrInvalid, trimDot(field))
	}
	if pl.Algorithm == pb.Algorithm_ALGORITHM_UNSPECIFIED {
		// Left out (JSON without "algorithm"): "unknown algorithm
		// ALGORITHM_UNSPECIFIED" read as if one had been given.
		return window.Limit{}, fmt.Errorf("%w: %salgorithm: required: one of %s", ErrInvalid, field, algorithmNames())
	}
	if pl.Algorithm < pb.Algorithm_ALGORITHM_UNSPECIFIED || pl.Algorithm > pb.Algorithm_GCRA {
		return window.Limit{}, fmt.Errorf("%w: %salgorithm: unknown algorithm %q (one of %s)", ErrInvalid, field, pl.Algorithm.String(), algorithmNames())
	}
	if pl.Limit <= 0 || pl.Limit > window.MaxLimit {
		return window.Limit{}, fmt.Errorf("%w: %slimit: must be between 1 and %d, got %d", ErrInvalid, field, window.MaxLimit, pl.Limit)
	}
	if pl.Calendar < pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED || pl.Calendar > pb.CalendarUnit_CALENDAR_UNIT_YEAR {
		return window.Limit{}, fmt.Errorf("%w: %scalendar: unknown calendar unit %d", ErrInvalid, field, pl.Calendar)
	}
	maxMS := window.MaxWindow / int64(time.Millisecond)
	if pl.Calendar == pb.CalendarUnit_CALENDAR_UNIT_UNSPECIFIED && (pl.WindowMs <= 0 || pl.WindowMs > maxMS) {
		return window.Limit{}, fmt.Errorf("%w: %swindow_ms: must be more than 0 and at most one year (%d), got %d",
			ErrInvalid, field, maxMS, pl.WindowMs)
	}
	if pl.WindowMs < 0 || pl.WindowMs > maxMS {
		return window.Limit{}, fmt.Errorf("%w: %swindow_ms: must be at most one year (%d), got %d", ErrInvalid, field, maxMS, pl.WindowMs)
	}
	l := window.Limit{
		Algorithm: window.Algorithm(pl.Algorithm),
		Limit:     pl.Limit,
		Window:    pl.WindowMs * int64(time.Millisecond),
		Buckets:   pl.Buckets,
		Calendar:  window.Unit(pl.Calendar),
		Burst:     pl.Burst,
	}
	if (l.Algorithm == window.SlidingCounter || l.Algorithm == window.SlidingCounterWeighted) && l.Buckets == 0 {
		// Spell the default out, so the log entry and the state identity
		// say exactly what was counted.
		l.Buckets = window.DefaultBucketsFor(l.Window)
	}
	if err := l.Validate(maxLog); err != nil {
		return window.Limit{}, AtField(field, err)
	}
	return l, nil
}

// LimitToProto is the inverse of Limit.
func LimitToProto(l *window.Limit) *pb.Limit {
	return &pb.Limit{
		Algorithm: pb.Algorithm(l.Algorithm),
		Limit:     l.Limit,
		WindowMs:  l.Window / int64(time.Millisecond),
		Buckets:   l.Buckets,
		Calendar:  pb.CalendarUnit(l.Calendar),
		Burst:     l.Burst,
	}
}

// AtField reports a validation error under its API path: prefix (such as
// "requests[3].limit.") and the field, in the proto's spelling.
func AtField(prefix string, err error) error {
	var fe *window.FieldError
	if !errors.As(err, &fe) {
		// The error names no field of its own: the prefix is the field.
		if at := strings.TrimSuffix(prefix, "."); at != "" {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, at, err)
		}
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return fmt.Errorf("%w: %s%s: %s", ErrInvalid, prefix, apiPath(fe.Field), fe.Msg)
}

// HandField names a limit's API field as the surfaces where people write
// limits by hand do (policy files, query parameters, floodgatectl's
// flags): window_ms is window there, a duration.
func HandField(apiField string) string {
	if apiField == "window_ms" {
		return "window"
	}
	return apiField
}

// apiPath spells a policy or limit field path as the API does: a limit's
// fields sit under "limit" in a policy ("limits[1].limit.window_ms").
func apiPath(path string) string {
	parent, field := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, field = path[:i], path[i+1:]
	}
	switch field {
	case "window":
		field = "window_ms"
	case "algorithm", "limit", "buckets", "calendar", "burst":
	default:
		return path
	}
	if parent == "" {
		return field
	}
	if parent == "reduced" || strings.HasPrefix(parent, "limits[") {
		return parent + ".limit." + field
	}
	return parent + "." + field
}

func trimDot(field string) string {
	if n := len(field); n > 0 && field[n-1] == '.' {
		return field[:n-1]
	}
	return field
}

// algorithmNames lists the algorithms a request may name, as JSON and the
// proto spell them.
func algorithmNames() string {
	var names []string
	for a := pb.Algorithm_ALGORITHM_UNSPECIFIED + 1; a <= pb.Algorithm_GCRA; a++ {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}
