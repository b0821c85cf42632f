package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/httpapi"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/rpc"
	"github.com/floodgate/floodgate/tracing"
	"github.com/floodgate/floodgate/window"
)

// errVersion asks for the version instead of a node (--version).
var errVersion = errors.New("version printed")

// options are the daemon's settings, from flags, FLOODGATE_* environment
// variables and a YAML file, in that order of precedence.
type options struct {
	cluster  cluster.Config
	rpc      rpc.Config
	httpAddr string // where the HTTP port listens
	grpcBind string // where the gRPC port listens (cluster.GRPCAddr is advertised)
	headers  httpapi.Headers
	logLevel slog.Level
	logJSON  bool
	pprof    bool
	// gcHeadroom is how much the heap may grow between collections at
	// least, in bytes (gctune); 0 leaves Go's default.
	gcHeadroom uint64
	tracing    tracing.Config
	security   securityFlags
	policies   []*policy.Policy // --policies: stored at start when the cluster has none
	// checkOnly asks for the configuration to be checked, not a node
	// (--check-config).
	checkOnly bool
	// flagEnv holds the FLOODGATE_* names of the flags' variables
	// (strayEnv).
	flagEnv map[string]bool

	// healthAddr is where the plaintext gRPC health listens ("": off).
	healthAddr string
	// startWait bounds the node's start (--start-timeout).
	startWait time.Duration
}

// parseOptions reads args, then the environment (FLOODGATE_GRPC_ADDR for
// --grpc-addr), then the YAML file named by --config (keys are flag names),
// for every flag not given on the command line.
func parseOptions(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("floodgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile  = fs.String("config", "", "YAML file with settings (keys are flag names)")
		showVer     = fs.Bool("version", false, "print the version and exit")
		checkOnly   = fs.Bool("check-config", false, "check the configuration (flags, environment, --config file and the files they name) and exit: 0 when a node could start with it")
		nodeID      = fs.String("node-id", "", "node name, stable across restarts (default: from the data dir, or generated)")
		dataDir     = fs.String("data-dir", "./floodgate-data", "directory for Raft logs and snapshots")
		grpcAddr    = fs.String("grpc-addr", "127.0.0.1:7700", "gRPC address for clients and peers")
		httpAddr    = fs.String("http-addr", "127.0.0.1:7701", "HTTP address for the HTTP/JSON API, health and metrics (empty: off)")
		healthAddr  = fs.String("health-addr", "", "plaintext gRPC address serving only the health service, for probes that cannot speak TLS such as the kubelet's (empty: off)")
		rlHeaders   = fs.String("http-ratelimit-headers", "draft", "rate-limit headers of HTTP answers: draft (RateLimit-Policy, RateLimit), legacy (X-RateLimit-*) or both")
		raftAddr    = fs.String("raft-addr", "127.0.0.1:7702", "Raft address shared by all of the node's groups")
		gossipAddr  = fs.String("gossip-addr", "127.0.0.1:7703", "memberlist gossip address (TCP and UDP)")
		join        = fs.String("join", "", "comma-separated gRPC addresses of members to join at first start; dns:NAME:PORT stands for every address NAME resolves to (a headless service)")
		expect      = fs.Int("bootstrap-expect", 0, "with --join: create the cluster once this many fresh nodes are found there, every address answers and none belongs to a cluster (the smallest node id creates it), so every node starts with the same arguments")
		dnsServer   = fs.String("dns-server", "", "DNS server (host:port) for dns: join names and the host names other nodes advertise (default: the system's resolver)")
		region      = fs.String("region", "", "region label of this node")
		advHost     = fs.String("advertise-host", "", "host name or IP other nodes and clients reach this node at, with the ports of the *-addr flags (default: the host of each, or this machine's one address when it is 0.0.0.0); in Kubernetes, the pod's stable DNS name")
		advGossip   = fs.String("advertise-gossip-host", "", "IP address other nodes reach this node's gossip port at (memberlist takes an IP only; default: --advertise-host when it is an IP, else the gossip-addr host, or this machine's one address when that is 0.0.0.0); in Kubernetes, the pod IP")
		slots       = fs.Int("slots", cluster.DefaultSlots, "slot count of a new cluster: keys hash to slots, which move between Raft groups as nodes join and leave")
		perNode     = fs.Int("groups-per-node", cluster.DefaultGroupsPerNode, "Raft groups each node leads in a new cluster")
		shards      = fs.Int("shards", 0, "create a legacy cluster of this many fixed shards, one Raft group each (0: a cluster of slots)")
		replicas    = fs.Int("replicas", cluster.DefaultReplicas, "replicas per shard of a new cluster (capped by the node count)")
		fsync       = fs.String("fsync", "batch", "how Raft writes are made durable: batch (fsync'd before acknowledged, one fsync shared by all groups; always is the same), off (left to the OS)")
		raftTrans   = fs.String("raft-transport", cluster.TransportRaftnet, "how Raft reaches other nodes: raftnet (one connection per node for every group) or legacy (a connection pool per group, as releases before raftnet; raftnet nodes fall back to it for such peers)")
		deadAfter   = durationFlag(fs, "dead-after", 30*time.Second, "how long a node may be unreachable before its replicas move")
		heartbeat   = durationFlag(fs, "raft-heartbeat-timeout", 500*time.Millisecond, "Raft heartbeat timeout")
		election    = durationFlag(fs, "raft-election-timeout", 500*time.Millisecond, "Raft election timeout")
		lease       = durationFlag(fs, "raft-lease-timeout", 500*time.Millisecond, "Raft leader lease timeout")
		maxLog      = fs.Int64("max-log-length", 10_000, "largest limit a sliding log may have")
		leaderWait  = durationFlag(fs, "leader-wait", 2*time.Second, "how long a check waits for its shard to elect a leader")
		maxWaiting  = fs.Int64("max-checks-waiting", rpc.DefaultMaxChecksWaiting, "the most checks this node's entry points (gRPC, Envoy RLS, HTTP) may wait on for their groups' answers (a batch is taken whole while fewer wait): more are refused at once, uncounted (Unavailable; HTTP 503 with Retry-After), so callers arriving faster than the groups commit cannot run the node out of memory (floodgate_checks_waiting, floodgate_checks_shed_total); 0: no bound")
		startWait   = durationFlag(fs, "start-timeout", 2*time.Minute, "how long a start may take to join or form the cluster and open its groups before the node exits with the reason; under an orchestrator's startup probe, a little less than its budget")
		fastFlush   = durationFlag(fs, "fast-flush-interval", 500*time.Millisecond, "the longest the count of a fast-consistency check waits on its shard leader before it is replicated")
		maxOffset   = durationFlag(fs, "max-clock-offset", cluster.DefaultMaxClockOffset, "the largest offset allowed between this node's clock and most of the others' before it stops (leaders stamp checks with their clocks); 0: not checked")
		maxSync     = durationFlag(fs, "max-sync-duration", cluster.DefaultMaxSyncDuration, "how long a write or fsync of the Raft log may hang before the node stops (exit 1) so that its groups fail over: a leader whose disk hangs keeps its followers from electing another; 0: not watched, else at least 1s")
		fastMax     = fs.Int64("fast-max-pending", 1000, "cost of fast checks a shard leader may answer before their batch is replicated (a failover may lose up to twice this)")
		maxStates   = fs.Int("max-key-states", cluster.DefaultMaxKeyStates, "the most key states (one per key and limit) a group holds: checks that would add more are refused (ResourceExhausted; HTTP 429 with error RESOURCE_EXHAUSTED) until old ones expire, so a flood of new keys cannot run the cluster out of memory (--max-state-mib bounds their bytes); 0: no bound")
		raftLogMiB  = fs.Int("raft-log-mib", cluster.DefaultRaftLogBytes>>20, "MiB of Raft log a group keeps before it snapshots, or as many as its states hold if more (about half is kept after a snapshot): raft counts entries, and entries of long keys are large; 0: raft's counts alone (4,096 entries between snapshots, 2,048 kept)")
		maxStateMiB = fs.Int("max-state-mib", cluster.DefaultMaxStateBytes>>20, "MiB a group's key states may hold on each replica (records, keys, sliding logs' timestamps, counters' buckets): checks that could make them hold more are refused as --max-key-states refuses (README Memory); 0: no bound")
		logLevel    = fs.String("log-level", "info", "debug, info, warn or error")
		logFormat   = fs.String("log-format", "text", "text or json")
		otlp        = fs.String("otlp-endpoint", "", "OTLP/gRPC collector for traces, host:port (empty: OTEL_EXPORTER_OTLP_ENDPOINT, else tracing off)")
		otlpPlain   = fs.Bool("otlp-insecure", false, "send traces without TLS (a collector on loopback or a sidecar)")
		sample      = fs.Float64("trace-sample", 1, "share of traces started here that are kept, 0..1 (a caller's sampled trace is always followed)")
		profiles    = fs.Bool("pprof", false, "serve Go profiles at /debug/pprof/ on the HTTP address")
		gcHeadroom  = fs.Int("gc-headroom-mib", 256, "MiB the heap may grow by between garbage collections at least (a small heap is otherwise collected every few MiB); 0: Go's default; GOGC in the environment wins, GOMEMLIMIT stays a ceiling")
		policyFile  = fs.String("policies", "", "YAML policy file (floodgatectl's format) stored at start when the cluster has no policies yet; later changes: floodgatectl policy apply")
	)
	sec := defineSecurity(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *showVer {
		return nil, errVersion
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *configFile == "" {
		*configFile, _ = lookupEnv("FLOODGATE_CONFIG")
	}
	if err := fillUnset(fs, *configFile, lookupEnv); err != nil {
		return nil, err
	}
	// Creation settings not given stay zero (the cluster's default), so
	// that the node says which ones given are ignored by an existing
	// cluster, and only those.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	flagEnv := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "version" { // not read from the environment (fillUnset)
			flagEnv[envName(f.Name)] = true
		}
	})
	for _, name := range []string{"slots", "groups-per-node"} {
		if *shards > 0 && given[name] {
			// Contradictory for a new cluster (one of fixed shards has no
			// slots and one group per shard), not inherited from an
			// existing one: refused before anything is created.
			return nil, fmt.Errorf("%s: a cluster of --shards (fixed shards) has no slots nor groups per node: give --shards or --%s, not both", name, name)
		}
	}
	creation := func(name string, v int) int {
		if given[name] {
			return v
		}
		return 0
	}
	// The node takes a zero for "the default" in these settings, but the
	// ranges it states exclude it: given as 0, it is a mistake.
	for _, z := range []struct {
		name string
		zero bool
	}{
		{"replicas", *replicas == 0}, {"slots", *slots == 0}, {"groups-per-node", *perNode == 0},
		{"fast-max-pending", *fastMax == 0}, {"fast-flush-interval", *fastFlush == 0}, {"dead-after", *deadAfter == 0},
		{"raft-heartbeat-timeout", *heartbeat == 0}, {"raft-election-timeout", *election == 0}, {"raft-lease-timeout", *lease == 0},
	} {
		if given[z.name] && z.zero {
			return nil, fmt.Errorf("%s: 0 is not a setting (leave it out for the default, %s)", z.name, fs.Lookup(z.name).DefValue)
		}
	}
	if *otlp != "" {
		if err := cluster.CheckAddr("otlp-endpoint", *otlp); err != nil {
			return nil, err
		}
	}
	// The listeners cluster.Config does not hold (the others are checked
	// by its Validate): a port out of range would pass --check-config and
	// fail only at start, once the node had opened its data dir.
	for _, l := range []struct{ flag, addr string }{{"http-addr", *httpAddr}, {"health-addr", *healthAddr}} {
		if l.addr != "" {
			if err := cluster.CheckListenAddr(l.flag, l.addr); err != nil {
				return nil, err
			}
		}
	}
	if err := distinctBinds(map[string]string{"grpc-addr": *grpcAddr, "http-addr": *httpAddr, "raft-addr": *raftAddr, "gossip-addr": *gossipAddr, "health-addr": *healthAddr}); err != nil {
		return nil, err
	}
	if *maxLog < 1 || *maxLog > window.MaxLogLength {
		return nil, fmt.Errorf("max-log-length: must be between 1 and %d, got %d", window.MaxLogLength, *maxLog)
	}
	if *startWait < minStartTimeout || *startWait > maxStartTimeout {
		return nil, fmt.Errorf("start-timeout: must be between %s and %s, got %s", minStartTimeout, maxStartTimeout, *startWait)
	}
	if *leaderWait < minLeaderWait || *leaderWait > maxLeaderWait {
		// Shorter, a check would give up before its commit: every one
		// answered "outcome unknown", counted all the same.
		return nil, fmt.Errorf("leader-wait: must be between %s and %s, got %s", minLeaderWait, maxLeaderWait, *leaderWait)
	}
	if *maxWaiting < 0 {
		return nil, fmt.Errorf("max-checks-waiting: must be 0 (no bound) or more, got %d", *maxWaiting)
	}
	headers, err := httpapi.ParseHeaders(*rlHeaders)
	if err != nil {
		return nil, fmt.Errorf("http-ratelimit-headers: %w", err)
	}
	if *logFormat != "text" && *logFormat != "json" {
		return nil, fmt.Errorf("log-format: want text or json, got %q", *logFormat)
	}
	if !(*sample >= 0 && *sample <= 1) { // NaN too
		return nil, fmt.Errorf("trace-sample: must be between 0 and 1, got %v", *sample)
	}
	if *raftLogMiB < 0 || *raftLogMiB > 1<<20 {
		return nil, fmt.Errorf("raft-log-mib: must be between 0 and %d, got %d", 1<<20, *raftLogMiB)
	}
	if *maxStateMiB < 0 || *maxStateMiB > 1<<24 {
		return nil, fmt.Errorf("max-state-mib: must be between 0 (no bound) and %d, got %d", 1<<24, *maxStateMiB)
	}
	if *gcHeadroom < 0 || *gcHeadroom > 1<<20 {
		return nil, fmt.Errorf("gc-headroom-mib: must be between 0 and %d, got %d", 1<<20, *gcHeadroom)
	}
	if err := sec.check(); err != nil {
		return nil, err
	}
	startPolicies, err := readPolicyFile(*policyFile, *maxLog)
	if err != nil {
		return nil, err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, fmt.Errorf("log-level: %w", err)
	}
	var resolver *net.Resolver
	if *dnsServer != "" {
		if err := cluster.CheckAddr("dns-server", *dnsServer); err != nil {
			return nil, err
		}
		server := *dnsServer
		resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		}}
	}
	adv := map[string]string{}
	for flag, bind := range map[string]string{"grpc-addr": *grpcAddr, "http-addr": *httpAddr, "raft-addr": *raftAddr, "gossip-addr": *gossipAddr} {
		if bind == "" {
			continue // http off
		}
		a, err := "", error(nil)
		if flag == "gossip-addr" {
			a, err = gossipAdvertise(bind, *advGossip, *advHost, interfaceIPs)
		} else {
			a, err = advertise(flag, bind, *advHost, interfaceIPs)
		}
		if err != nil {
			return nil, err
		}
		adv[flag] = a
	}
	sec.grpcHost, _, _ = net.SplitHostPort(adv["grpc-addr"])
	sec.raftHost, _, _ = net.SplitHostPort(adv["raft-addr"])
	id := *nodeID
	if id == "" {
		if id = cluster.ReadNodeID(*dataDir); id == "" {
			id = generateID()
		}
	}
	var joinAddrs []string
	for _, a := range strings.Split(*join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			// Refused here, before anything starts: a node retries an
			// unreachable seed for minutes, never a malformed one.
			if err := cluster.CheckJoinAddr("join", a); err != nil {
				return nil, err
			}
			joinAddrs = append(joinAddrs, a)
		}
	}
	return &options{
		cluster: cluster.Config{
			NodeID: id, DataDir: *dataDir, GRPCAddr: adv["grpc-addr"], HTTPAddr: adv["http-addr"], RaftAddr: adv["raft-addr"],
			GossipAddr: adv["gossip-addr"], RaftBind: *raftAddr, GossipBind: *gossipAddr, Region: *region,
			BootstrapExpect: *expect, Resolver: resolver, Join: joinAddrs, Shards: *shards, Replicas: creation("replicas", *replicas),
			Slots: creation("slots", *slots), GroupsPerNode: creation("groups-per-node", *perNode),
			Fsync: *fsync, RaftTransport: *raftTrans, DeadAfter: *deadAfter, HeartbeatTimeout: *heartbeat, ElectionTimeout: *election,
			LeaderLeaseTimeout: *lease, FastFlushInterval: *fastFlush, FastMaxPending: *fastMax, MaxClockOffset: *maxOffset, MaxKeyStates: *maxStates,
			MaxStateBytes: int64(*maxStateMiB) << 20, RaftLogBytes: int64(*raftLogMiB) << 20, MaxSyncDuration: *maxSync, MaxLogLength: *maxLog,
		},
		rpc:        rpc.Config{MaxLogLength: *maxLog, LeaderWait: *leaderWait, MaxChecksWaiting: *maxWaiting},
		httpAddr:   *httpAddr,
		startWait:  *startWait,
		healthAddr: *healthAddr,
		grpcBind:   *grpcAddr,
		headers:    headers,
		logLevel:   lvl,
		logJSON:    *logFormat == "json",
		tracing:    tracing.Config{Endpoint: *otlp, Insecure: *otlpPlain, SampleRatio: *sample, NodeID: id},
		pprof:      *profiles,
		gcHeadroom: uint64(*gcHeadroom) << 20,
		security:   *sec,
		policies:   startPolicies,
		checkOnly:  *checkOnly,
		flagEnv:    flagEnv,
	}, nil
}

// minStartTimeout and maxStartTimeout bound --start-timeout: a start
// opens every group and may wait for the other nodes of a fleet; an hour
// is past any probe's patience.
const (
	minStartTimeout = 10 * time.Second
	maxStartTimeout = time.Hour
)

// minLeaderWait is the least --leader-wait: a check must outlast a
// commit under load.
const minLeaderWait = 100 * time.Millisecond

// maxLeaderWait is the most --leader-wait: a caller held longer than a
// minute has long given up.
const maxLeaderWait = time.Minute

// fillUnset sets every flag not given on the command line from its
// FLOODGATE_* environment variable (set, even empty: an empty value turns
// a setting such as --http-addr off, as an empty flag does) or, failing
// that, the YAML file.
func fillUnset(fs *flag.FlagSet, file string, lookupEnv func(string) (string, bool)) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fileValues := map[string]fileValue{}
	if file != "" {
		var err error
		if fileValues, err = readConfigFile(file, fs); err != nil {
			return err
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		// --version is an action, read before the environment: its
		// variable would be ignored (strayEnv names it).
		if err != nil || set[f.Name] || f.Name == "config" || f.Name == "version" {
			return
		}
		env := envName(f.Name)
		if v, ok := lookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: invalid value %q: %w", env, v, e)
			}
			return
		}
		if v, ok := fileValues[f.Name]; ok {
			if e := fs.Set(f.Name, v.text); e != nil {
				err = fmt.Errorf("config: %s: line %d: %s: invalid value %q: %w", file, v.line, f.Name, v.text, e)
			}
		}
	})
	return err
}

// envName is the environment variable of flag: FLOODGATE_GRPC_ADDR for
// grpc-addr.
func envName(flag string) string {
	return "FLOODGATE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// readConfigFile reads a YAML file of flag names and values. A value is
// taken as written, not as YAML would type it (node-id: 0123 is "0123",
// not 83; an empty value is empty, not "<nil>"); a list is joined with
// commas, as the flags take lists.
func readConfigFile(file string, fs *flag.FlagSet) (map[string]fileValue, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %s: %w", file, err)
	}
	for {
		// A second document would be ignored: say so instead. An empty
		// one (a trailing ---, as generators write) is nothing.
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", file, err)
		}
		if len(extra.Content) == 1 && extra.Content[0].Tag == "!!null" && extra.Content[0].Value == "" {
			continue
		}
		return nil, fmt.Errorf("config: %s: line %d: one YAML document only (a second starts here)", file, extra.Line)
	}
	values := map[string]fileValue{}
	if len(doc.Content) == 0 {
		return values, nil // an empty file
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config: %s: line %d: want a mapping of setting: value", file, m.Line)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if fs.Lookup(k.Value) == nil || k.Value == "config" || k.Value == "version" {
			return nil, fmt.Errorf("config: %s: line %d: unknown setting %q", file, k.Line, k.Value)
		}
		if _, dup := values[k.Value]; dup {
			return nil, fmt.Errorf("config: %s: line %d: %q given twice", file, k.Line, k.Value)
		}
		s, err := scalarText(v)
		if err != nil {
			return nil, fmt.Errorf("config: %s: line %d: %s: %w", file, v.Line, k.Value, err)
		}
		values[k.Value] = fileValue{text: s, line: v.Line}
	}
	return values, nil
}

// fileValue is a setting's value in a config file, and its line.
type fileValue struct {
	text string
	line int
}

// scalarText is a value's text as written: a scalar, nothing (null), or a
// list of scalars joined with commas.
func scalarText(n *yaml.Node) (string, error) {
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return "", nil
	case n.Kind == yaml.ScalarNode:
		return n.Value, nil
	case n.Kind == yaml.SequenceNode:
		parts := make([]string, len(n.Content))
		for i, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return "", errors.New("want a list of values")
			}
			parts[i] = c.Value
		}
		return strings.Join(parts, ","), nil
	}
	return "", errors.New("want a value or a list of values")
}

func generateID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "node-" + hex.EncodeToString(b[:])
}
