package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/rpc"
)

// noEnv is an environment with no variables set.
func noEnv(string) (string, bool) { return "", false }

// envOf is an environment of the variables in env.
func envOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// Flags win over FLOODGATE_* variables, which win over the YAML file,
// which wins over the defaults.
func TestOptionsPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "floodgate.yaml")
	yaml := "grpc-addr: 10.0.0.1:1\nraft-addr: 10.0.0.1:2\nshards: 16\njoin: [10.0.0.9:7700, 10.0.0.8:7700]\ndead-after: 1m\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FLOODGATE_RAFT_ADDR": "10.0.0.2:2", "FLOODGATE_REPLICAS": "5", "FLOODGATE_NODE_ID": "from-env"}
	o, err := parseOptions([]string{"--config", file, "--replicas", "1", "--data-dir", t.TempDir()},
		envOf(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cluster
	if c.GRPCAddr != "10.0.0.1:1" || c.RaftAddr != "10.0.0.2:2" || c.Shards != 16 || c.Replicas != 1 ||
		c.NodeID != "from-env" || c.DeadAfter != time.Minute || c.GossipAddr != "127.0.0.1:7703" ||
		strings.Join(c.Join, ",") != "10.0.0.9:7700,10.0.0.8:7700" {
		t.Fatalf("options %+v", c)
	}
	if o.startWait != 2*time.Minute {
		t.Errorf("start-timeout by default %s, want 2m", o.startWait)
	}
	if o, err := parseOptions([]string{"--start-timeout", "280s", "--data-dir", t.TempDir()}, noEnv, io.Discard); err != nil || o.startWait != 280*time.Second {
		t.Errorf("--start-timeout 280s: %v, %v", o, err)
	}
	if o.rpc.MaxChecksWaiting != rpc.DefaultMaxChecksWaiting {
		t.Errorf("max-checks-waiting by default %d, want %d", o.rpc.MaxChecksWaiting, rpc.DefaultMaxChecksWaiting)
	}
	if o, err := parseOptions([]string{"--max-checks-waiting", "0", "--data-dir", t.TempDir()}, noEnv, io.Discard); err != nil || o.rpc.MaxChecksWaiting != 0 {
		t.Errorf("--max-checks-waiting 0 (no bound): %v, %v", o, err)
	}
}

func TestOptionsErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("shardz: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	version := filepath.Join(dir, "version.yaml")
	if err := os.WriteFile(version, []byte("replicas: 1\nversion: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trailing := filepath.Join(dir, "trailing.yaml")
	if err := os.WriteFile(trailing, []byte("replicas: 1\n---\n# nothing more\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := parseOptions([]string{"--config", trailing}, noEnv, io.Discard); err != nil || o.cluster.Replicas != 1 {
		t.Errorf("a file ending in empty documents: %v", err)
	}
	notANumber := filepath.Join(dir, "notanumber.yaml")
	if err := os.WriteFile(notANumber, []byte("replicas: 1\nslots: abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	twoDocs := filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(twoDocs, []byte("replicas: 3\n---\nreplicas: 99\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--config", bad}, nil, `unknown setting "shardz"`},
		// --version is an action, not a setting: ignored in a file before.
		{[]string{"--config", version}, nil, `line 2: unknown setting "version"`},
		{nil, map[string]string{"FLOODGATE_SHARDS": "many"}, `FLOODGATE_SHARDS: invalid value "many"`},
		// A value the setting cannot parse: the file, its line and the value.
		{[]string{"--config", notANumber}, nil, `notanumber.yaml: line 2: slots: invalid value "abc"`},
		{[]string{"--log-level", "loud"}, nil, "log-level"},
		{[]string{"stray"}, nil, `unexpected argument "stray"`},
		// A malformed seed is refused before anything starts.
		{[]string{"--join", "garbage"}, nil, `join: "garbage" is not host:port`},
		{[]string{"--join", "127.0.0.1:7700,127.0.0.1"}, nil, `join: "127.0.0.1" is not host:port`},
		{[]string{"--join", "127.0.0.1:99999"}, nil, "join: \"127.0.0.1:99999\": port must be"},
		{[]string{"--join", "127.0.0.1:0"}, nil, "join: \"127.0.0.1:0\": port must be"},
		{[]string{"--join", "host:http"}, nil, "join: \"host:http\": port must be"},
		{[]string{"--join", "bad/host:7700"}, nil, "join: \"bad/host:7700\": host must be"},
		{nil, map[string]string{"FLOODGATE_JOIN": "::::"}, "join:"},
		{[]string{"--max-log-length", "0"}, nil, "max-log-length: must be between 1 and 1000000"},
		{[]string{"--max-log-length", "1000001"}, nil, "max-log-length: must be between 1 and 1000000"},
		{[]string{"--gc-headroom-mib", "-1"}, nil, "gc-headroom-mib: must be between 0 and 1048576"},
		{[]string{"--raft-log-mib", "-1"}, nil, "raft-log-mib: must be between 0 and 1048576, got -1"},
		{[]string{"--max-state-mib", "-1"}, nil, "max-state-mib: must be between 0 (no bound) and 16777216, got -1"},
		{[]string{"--max-state-mib", "16777217"}, nil, "max-state-mib: must be between 0 (no bound) and 16777216"},
		{[]string{"--leader-wait", "-1s"}, nil, "leader-wait: must be between 100ms and 1m0s, got -1s"},
		{[]string{"--leader-wait", "0s"}, nil, "leader-wait: must be between 100ms and 1m0s, got 0s"},
		{[]string{"--leader-wait", "1ns"}, nil, "leader-wait: must be between 100ms and 1m0s, got 1ns"},
		{[]string{"--leader-wait", "2h"}, nil, "leader-wait: must be between 100ms and 1m0s, got 2h0m0s"},
		{[]string{"--max-checks-waiting", "-1"}, nil, "max-checks-waiting: must be 0 (no bound) or more, got -1"},
		{nil, map[string]string{"FLOODGATE_MAX_CHECKS_WAITING": "many"}, `FLOODGATE_MAX_CHECKS_WAITING: invalid value "many"`},
		{[]string{"--start-timeout", "0s"}, nil, "start-timeout: must be between 10s and 1h0m0s, got 0s"},
		{[]string{"--start-timeout", "2h"}, nil, "start-timeout: must be between 10s and 1h0m0s, got 2h0m0s"},
		{[]string{"--shards", "5", "--slots", "10"}, nil, "slots: a cluster of --shards (fixed shards) has no slots nor groups per node: give --shards or --slots, not both"},
		{[]string{"--shards", "5", "--groups-per-node", "3"}, nil, "groups-per-node: a cluster of --shards"},
		{[]string{"--trace-sample", "NaN"}, nil, "trace-sample: must be between 0 and 1, got NaN"},
		// A second YAML document would be ignored.
		{[]string{"--config", twoDocs}, nil, "line 2: one YAML document only"},
		{[]string{"--otlp-endpoint", "not a host"}, nil, "otlp-endpoint:"},
		// Two listeners on one port: the second could not bind.
		{[]string{"--gossip-addr", "127.0.0.1:7700"}, nil, "grpc-addr: 127.0.0.1:7700 is also --gossip-addr's"},
		{[]string{"--http-addr", "0.0.0.0:7702"}, nil, "raft-addr: 127.0.0.1:7702 is also --http-addr's"},
	} {
		_, err := parseOptions(tc.args, envOf(tc.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: got %v, want an error mentioning %s", tc.args, tc.env, err, tc.want)
		}
	}
}

// With no flags: a single node on loopback, data in ./floodgate-data, and
// a node id that stays the same across restarts.
func TestDefaults(t *testing.T) {
	dir := t.TempDir()
	o, err := parseOptions(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	eff := o.cluster.WithDefaults()
	if eff.DataDir != "./floodgate-data" || eff.GRPCAddr != "127.0.0.1:7700" || len(eff.Join) != 0 ||
		eff.Slots != 4096 || eff.GroupsPerNode != 1 || eff.Shards != 0 || eff.Replicas != 3 || eff.Fsync != "batch" ||
		eff.MaxKeyStates != 2_000_000 || eff.MaxStateBytes != 1<<30 || eff.RaftLogBytes != 64<<20 {
		t.Fatalf("defaults %+v", eff)
	}
	// Creation settings not given stay zero, so that only given ones are
	// said to be ignored by an existing cluster.
	if o.cluster.Slots != 0 || o.cluster.GroupsPerNode != 0 || o.cluster.Replicas != 0 {
		t.Fatalf("creation settings not given: %+v", o.cluster)
	}
	if err := os.WriteFile(filepath.Join(dir, "node-id"), []byte("n7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err = parseOptions([]string{"--data-dir", dir}, noEnv, io.Discard)
	if err != nil || o.cluster.NodeID != "n7" {
		t.Fatalf("node id from the data dir: %v %v", o.cluster.NodeID, err)
	}
}

// --version asks for the version and starts nothing, whatever else is set.
func TestVersionFlag(t *testing.T) {
	_, err := parseOptions([]string{"--version", "--replicas", "1"}, noEnv, io.Discard)
	if !errors.Is(err, errVersion) {
		t.Fatalf("--version: %v, want errVersion", err)
	}
}

// A config file's values are taken as written, not as YAML types them,
// and an empty one is empty; an environment variable that is set but
// empty counts as set (it turns the HTTP port off, over the file).
func TestConfigFileValuesAsWritten(t *testing.T) {
	file := filepath.Join(t.TempDir(), "floodgate.yaml")
	yaml := "node-id: 0123\nregion:\nhttp-addr: 127.0.0.1:7986\njoin: [10.0.0.9:7700, 0x1F.example:7700]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions([]string{"--config", file, "--data-dir", t.TempDir()}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c := o.cluster; c.NodeID != "0123" || c.Region != "" || o.httpAddr != "127.0.0.1:7986" || strings.Join(c.Join, ",") != "10.0.0.9:7700,0x1F.example:7700" {
		t.Errorf("node-id %q region %q http %q join %v", c.NodeID, c.Region, o.httpAddr, c.Join)
	}
	o, err = parseOptions([]string{"--config", file, "--data-dir", t.TempDir()}, envOf(map[string]string{"FLOODGATE_HTTP_ADDR": ""}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.httpAddr != "" {
		t.Errorf("FLOODGATE_HTTP_ADDR= left http-addr %q", o.httpAddr)
	}
	for bad, want := range map[string]string{
		"replicas: {a: 1}\n":       "line 1: replicas: want a value or a list",
		"join: [[a]]\n":            "line 1: join: want a list of values",
		"node-id: a\nnode-id: b\n": `line 2: "node-id" given twice`,
		"- node-id\n":              "want a mapping",
		"nodeid: a\n":              `unknown setting "nodeid"`,
		"dead-after: 30\n":         `line 1: dead-after: invalid value "30"`,
		"slots: 1e3\n":             `line 1: slots: invalid value "1e3"`,
	} {
		if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := parseOptions([]string{"--config", file, "--data-dir", t.TempDir()}, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", bad, err, want)
		}
	}
}

// A duration flag's error says what is wrong with the value, from the
// command line, the environment or the file alike.
func TestDurationFlagsSayWhy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "floodgate.yaml")
	if err := os.WriteFile(file, []byte("fast-flush-interval: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--dead-after", "30"}, nil, `missing unit in duration "30"`},
		{nil, map[string]string{"FLOODGATE_LEADER_WAIT": "soon"}, `FLOODGATE_LEADER_WAIT: invalid value "soon": time: invalid duration "soon"`},
		{[]string{"--config", file}, nil, `floodgate.yaml: line 1: fast-flush-interval: invalid value "2": time: missing unit in duration "2"`},
	} {
		_, err := parseOptions(tc.args, envOf(tc.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want an error containing %q", tc.args, tc.env, err, tc.want)
		}
	}
	o, err := parseOptions([]string{"--dead-after", "1m30s", "--data-dir", t.TempDir()}, noEnv, io.Discard)
	if err != nil || o.cluster.DeadAfter != 90*time.Second {
		t.Fatalf("--dead-after 1m30s: %v %v", o, err)
	}
}

// Creation settings given by flag, environment or file reach the node as
// given, even when equal to the default: an existing cluster with other
// values then says they are ignored.
func TestCreationSettingsGiven(t *testing.T) {
	file := filepath.Join(t.TempDir(), "floodgate.yaml")
	if err := os.WriteFile(file, []byte("groups-per-node: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		if k == "FLOODGATE_REPLICAS" {
			return "3", true
		}
		return "", false
	}
	o, err := parseOptions([]string{"--slots", "4096", "--config", file}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.cluster.Slots != 4096 || o.cluster.GroupsPerNode != 2 || o.cluster.Replicas != 3 {
		t.Fatalf("given settings lost: %+v", o.cluster)
	}
}

// A setting whose zero the node takes for its default is refused when
// given as 0, from a flag, the environment or the file alike: the ranges
// the node states exclude it.
func TestZeroIsNotASetting(t *testing.T) {
	for _, name := range []string{"replicas", "slots", "groups-per-node", "fast-max-pending", "fast-flush-interval",
		"dead-after", "raft-heartbeat-timeout", "raft-election-timeout", "raft-lease-timeout"} {
		zero := "0"
		if strings.Contains(name, "interval") || strings.Contains(name, "timeout") || name == "dead-after" {
			zero = "0s"
		}
		_, err := parseOptions([]string{"--" + name, zero}, noEnv, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), name+": 0 is not a setting") {
			t.Errorf("--%s %s: %v", name, zero, err)
		}
		env := "FLOODGATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if _, err := parseOptions(nil, envOf(map[string]string{env: zero}), io.Discard); err == nil || !strings.Contains(err.Error(), name+": 0") {
			t.Errorf("%s=%s: %v", env, zero, err)
		}
	}
	// Where 0 means something, it stays allowed.
	for _, args := range [][]string{{"--shards", "0"}, {"--max-key-states", "0"}, {"--max-state-mib", "0"}, {"--raft-log-mib", "0"}, {"--gc-headroom-mib", "0"}, {"--max-clock-offset", "0s"},
		{"--max-sync-duration", "0s"}, {"--grpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0"}} {
		if _, err := parseOptions(append(args, "--data-dir", t.TempDir()), noEnv, io.Discard); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// A FLOODGATE_* variable that sets no flag (a typo) is named, so that the
// node warns instead of running on the default without a word; the
// flags' variables, floodgatectl's and the tests' are not.
func TestStrayEnv(t *testing.T) {
	o, err := parseOptions([]string{"--data-dir", t.TempDir()}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	environ := []string{"FLOODGATE_DATA_DIRR=/var/lib/floodgate", "FLOODGATE_GRPC_ADDR=127.0.0.1:7700", "FLOODGATE_CONFIG=",
		"FLOODGATE_ADDR=127.0.0.1:7700", "FLOODGATE_TOKEN_FILE=t", "FLOODGATE_TEST_CLOCK_SKEW=2s", "FLOODGATE_REPLICA=1",
		"PATH=/bin", "FLOODGATE_GOSSIP_KEY_FILE=k", "FLOODGATE_CHECK_CONFIG=true", "FLOODGATE_VERSION=true",
		// Kubernetes' service links for the Services floodgate and
		// floodgate-admin: not the operator's, never warned of.
		"FLOODGATE_SERVICE_HOST=10.0.0.1", "FLOODGATE_SERVICE_PORT=7700", "FLOODGATE_SERVICE_PORT_GRPC=7700",
		"FLOODGATE_PORT=tcp://10.0.0.1:7700", "FLOODGATE_PORT_7700_TCP=tcp://10.0.0.1:7700",
		"FLOODGATE_PORT_7700_TCP_PROTO=tcp", "FLOODGATE_PORT_7700_TCP_PORT=7700", "FLOODGATE_PORT_7700_TCP_ADDR=10.0.0.1",
		"FLOODGATE_ADMIN_SERVICE_HOST=10.0.0.2", "FLOODGATE_ADMIN_PORT_7701_TCP_ADDR=10.0.0.2",
		// Near misses of those are the operator's.
		"FLOODGATE_SERVICE_HOSTS=x", "FLOODGATE_PORT_7700=x"}
	// --version is not read from the environment: its variable is stray.
	want := []string{"FLOODGATE_DATA_DIRR", "FLOODGATE_PORT_7700", "FLOODGATE_REPLICA", "FLOODGATE_SERVICE_HOSTS", "FLOODGATE_VERSION"}
	if got := strayEnv(environ, o.flagEnv); !slices.Equal(got, want) {
		t.Fatalf("stray variables %v, want %v", got, want)
	}
}
