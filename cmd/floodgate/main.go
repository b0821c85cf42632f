package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/health"

	"github.com/floodgate/floodgate/authz"
	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/gctune"
	"github.com/floodgate/floodgate/httpapi"
	"github.com/floodgate/floodgate/metrics"
	"github.com/floodgate/floodgate/rpc"
	"github.com/floodgate/floodgate/tracing"
	"github.com/floodgate/floodgate/version"
	"github.com/floodgate/floodgate/wallclock"
)

func main() {
	if runCheckStore(os.Args[1:]) {
		return
	}
	opts, err := parseOptions(os.Args[1:], os.LookupEnv, os.Stderr)
	if errors.Is(err, errVersion) {
		fmt.Println("floodgate", version.Get())
		os.Exit(0)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floodgate:", err)
		os.Exit(2)
	}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: opts.logLevel})
	if opts.logJSON {
		handler = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: opts.logLevel})
	}
	log := slog.New(handler)
	for _, name := range strayEnv(os.Environ(), opts.flagEnv) {
		log.Warn("environment variable "+name+" sets nothing: no flag is named so (FLOODGATE_GRPC_ADDR sets --grpc-addr)", "variable", name)
	}
	if opts.checkOnly {
		if err := checkConfig(opts); err != nil {
			fmt.Fprintln(os.Stderr, "floodgate:", err)
			os.Exit(2)
		}
		fmt.Println("floodgate: configuration ok")
		return
	}
	routeLibraryLogs(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, log); err != nil {
		log.Error("floodgate stopped", "err", err)
		os.Exit(1)
	}
}

// run serves one node until ctx ends (a signal) or the node leaves its
// cluster, then shuts down cleanly.
func run(ctx context.Context, opts *options, log *slog.Logger) error {
	// The start's budget counts from here: opening the stores (their
	// check, the log's replay) is part of what a startup probe waits for.
	startBy := time.Now().Add(opts.startWait)
	sec, err := newSecurity(opts.security)
	if err != nil {
		return err
	}
	cfg := nodeConfig(opts, sec)
	cfg.Logger = log
	cfg.CheckStore = checkInChild
	if err := sec.refuseOpen(bindsOf(opts, cfg)); err != nil {
		return err
	}
	sec.warnIfOpen(bindsOf(opts, cfg), log)
	if skew := wallclock.Skew(); skew != 0 {
		log.Warn("test build: this node's clock is skewed on purpose; never run it in production", "skew", skew)
	}
	sec.watch(ctx, log)
	go gctune.Run(ctx, opts.gcHeadroom, 5*time.Second)
	lns, err := listen(opts)
	if err != nil {
		return err
	}
	grpcLn := lns.grpc
	if cfg.GRPCAddr == opts.grpcBind {
		cfg.GRPCAddr = grpcLn.Addr().String() // port 0: the port picked
	}
	if err := metrics.Bridge(); err != nil {
		lns.close()
		return err
	}
	flushTraces, serverOpts, dialOpts, err := tracing.Setup(ctx, opts.tracing)
	if err != nil {
		lns.close()
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := flushTraces(fctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}()
	dialOpts = append(dialOpts, sec.peerDialOptions()...)
	if cfg.Resolver != nil {
		dialOpts = append(dialOpts, rpc.DialResolver(cfg.Resolver))
	}
	peers := rpc.NewPeers(dialOpts...)
	defer peers.Close()
	node, err := cluster.Open(cfg, peers)
	if err != nil {
		lns.close()
		return err
	}
	gs, health, limiter := rpc.NewGRPCServer(node, peers, opts.rpc, append(serverOpts, sec.serverOptions()...)...)
	if err := metrics.RegisterNode(node.Gauges); err != nil {
		lns.close()
		node.Close()
		return err
	}
	if sec.gossipFile != nil {
		go sec.gossipFile.watch(ctx, node.SetGossipKeys, log)
	}
	if len(sec.certs()) > 0 {
		if err := metrics.RegisterCertificates(sec.certExpiry); err != nil {
			lns.close()
			node.Close()
			return err
		}
	}
	go func() {
		if err := gs.Serve(grpcLn); err != nil {
			log.Error("grpc server", "err", err)
		}
	}()
	var hs *http.Server
	if lns.http != nil {
		hs = serveHTTP(lns.http, opts, sec, node, health, limiter, log)
	}
	if lns.health != nil {
		defer serveHealth(lns.health, health).Stop()
	}
	shutdown := func() error {
		rpc.StopServing(health)
		hctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		node.HandOff(hctx)
		cancel()
		if hs != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = hs.Shutdown(sctx)
			cancel()
		}
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(3 * time.Second):
			gs.Stop()
		}
		return node.Close()
	}
	startCtx, cancel := context.WithDeadline(ctx, startBy)
	started := make(chan error, 1)
	go func() { started <- node.Start(startCtx) }()
	select {
	case err = <-started:
	case <-node.StorageFailed():
		// A node restarted on a disk still full fails at its first write,
		// which may come while it starts (see the select below).
		cancel()
		return node.StorageErr()
	}
	cancel()
	if err != nil {
		_ = shutdown()
		return startError(err, startCtx, opts.startWait)
	}
	rpc.MarkLive(health)
	go rpc.WatchReadiness(ctx, health, node)
	go rpc.ForgetDeletedPolicies(ctx, node, metrics.ForgetPolicies)
	go seedPolicies(ctx, node, opts.policies, log)
	c := node.Config()
	log.Info("floodgate ready", "version", version.Get().Version, "node", node.ID(), "cluster", node.View().ClusterID, "grpc", c.GRPCAddr,
		"http", opts.httpAddr, "raft", c.RaftAddr, "gossip", c.GossipAddr, "data", c.DataDir)
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case <-node.Left():
		log.Info("this node left the cluster; shutting down")
	case <-node.ClockFailed():
		// A clean stop: the disk is fine, and handing leadership off is
		// what this stop is for.
		err := node.ClockErr()
		log.Error("stopping: this node's clock is out of step with the cluster's", "err", err)
		if serr := shutdown(); serr != nil {
			log.Warn("shutdown", "err", serr)
		}
		return err
	case <-node.Replaced():
		// No clean shutdown either: this node is not the member the
		// cluster lists, and has nothing of it to hand off.
		return node.ReplacedErr()
	case <-node.StorageFailed():
		// No clean shutdown: it would write to the log (a leadership
		// hand-off, raft's term), and the disk is what failed. What was
		// acknowledged is on disk; the others serve meanwhile.
		return node.StorageErr()
	}
	return shutdown()
}

// serveHTTP serves the HTTP/JSON API, liveness and readiness on
// ln (--http-addr, bound by listen). Readiness is the gRPC health's (health), so /readyz and
// a gRPC probe agree: not before the node has caught up, not while the
// cluster refuses it, not once it shuts down.
func serveHTTP(ln net.Listener, opts *options, sec *security, node *cluster.Node, health *health.Server, limiter httpapi.Limiter, log *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := node.Refused(); err != nil {
			http.Error(w, "the cluster refuses this node: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if rpc.Ready(health) {
			fmt.Fprintln(w, "ready")
			return
		}
		http.Error(w, "not ready: not a cluster member yet, not caught up with its groups' leaders, or shutting down", http.StatusServiceUnavailable)
	})
	httpapi.Register(mux, limiter, httpapi.Options{Headers: opts.headers})
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		httpapi.MethodNotAllowed(mux, path, "GET, HEAD")
	}
	if opts.pprof {
		// Profiles show keys and cost CPU: operators only, once calls are
		// checked at all.
		for path, h := range map[string]http.HandlerFunc{"/debug/pprof/": pprof.Index, "/debug/pprof/cmdline": pprof.Cmdline,
			"/debug/pprof/profile": pprof.Profile, "/debug/pprof/symbol": pprof.Symbol, "/debug/pprof/trace": pprof.Trace} {
			mux.Handle(path, sec.rules.HTTP(authz.Admin, h))
		}
	}
	hs := httpapi.NewServer(mux, sec.clientPortTLS())
	go func() {
		serve := hs.Serve
		if hs.TLSConfig != nil {
			serve = func(ln net.Listener) error { return hs.ServeTLS(ln, "", "") }
		}
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	return hs
}

// startError names --start-timeout when the start ran out of it, so that
// an operator knows which setting gave up (the node's own error says what
// it was waiting for).
func startError(err error, startCtx context.Context, budget time.Duration) error {
	if errors.Is(startCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("start did not finish within --start-timeout %s: %w", budget, err)
	}
	return err
}
