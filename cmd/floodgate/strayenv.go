package main

import (
	"regexp"
	"slices"
	"strings"
)

// otherEnv are FLOODGATE_* variables that set no flag of the daemon but
// are someone's: floodgatectl's (an operator's shell or a pod may set
// them beside the daemon's) and the tests'.
var otherEnv = []string{"FLOODGATE_ADDR", "FLOODGATE_CACERT", "FLOODGATE_CERT", "FLOODGATE_KEY",
	"FLOODGATE_TOKEN_FILE", "FLOODGATE_WRITE_FUZZ_SEEDS"}

// serviceLink matches the variables Kubernetes gives every pod for each
// Service of its namespace (enableServiceLinks, on by default): a Service
// named floodgate, as in deploy/kubernetes, gives FLOODGATE_SERVICE_HOST,
// FLOODGATE_SERVICE_PORT_GRPC, FLOODGATE_PORT, FLOODGATE_PORT_7700_TCP_ADDR
// and so on; one named floodgate-admin gives FLOODGATE_ADMIN_SERVICE_HOST.
// They set nothing, and warning of them at every start would teach
// operators to ignore the warning.
var serviceLink = regexp.MustCompile(`^FLOODGATE(_[A-Z0-9_]+)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)

// strayEnv returns, sorted, the FLOODGATE_* variables of environ
// ("NAME=value" entries, as os.Environ gives them) that set nothing:
// no flag's (flagEnv holds the names of the flags' variables) and no
// other program's. A misspelt one (FLOODGATE_DATA_DIRR) would otherwise
// leave its setting at the default without a word.
func strayEnv(environ []string, flagEnv map[string]bool) []string {
	var stray []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "FLOODGATE_") || flagEnv[name] || slices.Contains(otherEnv, name) ||
			strings.HasPrefix(name, "FLOODGATE_TEST_") || serviceLink.MatchString(name) {
			continue
		}
		stray = append(stray, name)
	}
	slices.Sort(stray)
	return stray
}
