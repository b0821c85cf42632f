package main

import (
	"slices"
	"strings"
)

// otherEnv are FLOODGATE_* variables that set no flag of the daemon but
// are someone's: floodgatectl's (an operator's shell or a pod may set
// them beside the daemon's) and the tests'.
var otherEnv = []string{"FLOODGATE_ADDR", "FLOODGATE_CACERT", "FLOODGATE_CERT", "FLOODGATE_KEY",
	"FLOODGATE_TOKEN_FILE", "FLOODGATE_WRITE_FUZZ_SEEDS"}

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
			strings.HasPrefix(name, "FLOODGATE_TEST_") {
			continue
		}
		stray = append(stray, name)
	}
	slices.Sort(stray)
	return stray
}
