package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/freeport"
)

// Binaries are the built commands.
type Binaries struct {
	Floodgate string
	Ctl       string
}

// Build compiles floodgate and floodgatectl into dir.
func Build(dir string) (Binaries, error) { return build(dir, "", "") }

// BuildVersion is Build with the binaries stamped as version (as make
// release does), for an upgrade from one build to another.
func BuildVersion(dir, version string) (Binaries, error) { return build(dir, version, "") }

// BuildTagged is Build with build tags: a test build such as clockskew
// (wallclock), never a release.
func BuildTagged(dir, tags string) (Binaries, error) { return build(dir, "", tags) }

func build(dir, version, tags string) (Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{Floodgate: filepath.Join(dir, "floodgate"), Ctl: filepath.Join(dir, "floodgatectl")}
	for out, pkg := range map[string]string{b.Floodgate: "./cmd/floodgate", b.Ctl: "./cmd/floodgatectl"} {
		args := []string{"build", "-o", out}
		if version != "" {
			args = append(args, "-ldflags", "-X github.com/floodgate/floodgate/version.Override="+version)
		}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// ModuleRoot is the directory of the go.mod above the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found")
		}
		dir = parent
	}
}

// Node is one floodgate process.
type Node struct {
	ID                       string
	Dir                      string
	GRPC, HTTP, Raft, Gossip string
	Args                     []string // extra flags
	Env                      []string // extra environment, NAME=value
	bin                      string
	mu                       sync.Mutex
	cmd                      *exec.Cmd
	exited                   chan struct{}
	conn                     *grpc.ClientConn
	logPath                  string
}

// NewNode prepares (does not start) a node with free loopback ports and a
// data directory under dir.
func NewNode(bin Binaries, dir, id string, args ...string) (*Node, error) {
	n := &Node{ID: id, Dir: filepath.Join(dir, id), Args: args, bin: bin.Floodgate, logPath: filepath.Join(dir, id+".log")}
	var err error
	for _, p := range []*string{&n.GRPC, &n.HTTP, &n.Raft, &n.Gossip} {
		if *p, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	if n.conn, err = grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	return n, nil
}

// Redial replaces the node's client connection by one made with opts
// (TLS, a token), for nodes that require them.
func (n *Node) Redial(opts ...grpc.DialOption) error {
	conn, err := grpc.NewClient(n.GRPC, opts...)
	if err != nil {
		return err
	}
	n.conn.Close()
	n.conn = conn
	return nil
}

// FreeAddr returns a loopback address whose port is free for TCP and UDP.
func FreeAddr() (string, error) { return freeport.Addr() }

// Start launches the process; join lists gRPC addresses for --join.
func (n *Node) Start(join ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s already running", n.ID)
	}
	args := []string{
		"--node-id", n.ID, "--data-dir", n.Dir, "--grpc-addr", n.GRPC, "--http-addr", n.HTTP,
		"--raft-addr", n.Raft, "--gossip-addr", n.Gossip,
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	args = append(args, n.Args...)
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(n.Env) > 0 {
		cmd.Env = append(os.Environ(), n.Env...)
	}
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	return nil
}

// Kill sends SIGKILL and waits for the process to die: a crash.
func (n *Node) Kill() { n.signal(syscall.SIGKILL, 10*time.Second) }

// Use makes the node's next Start run bin: an upgrade.
func (n *Node) Use(bin Binaries) {
	n.mu.Lock()
	n.bin = bin.Floodgate
	n.mu.Unlock()
}

// Hup sends SIGHUP: the node reloads its certificates and tokens.
func (n *Node) Hup() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s not running", n.ID)
	}
	return n.cmd.Process.Signal(syscall.SIGHUP)
}

// Stop sends SIGTERM and waits for a clean exit.
func (n *Node) Stop() { n.signal(syscall.SIGTERM, 30*time.Second) }

func (n *Node) signal(sig syscall.Signal, wait time.Duration) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Exited is closed when the running process exits by itself.
func (n *Node) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return n.exited
}

// Running reports whether the process is up.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Log returns what the process has written so far.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

// Conn is a gRPC connection to the node.
func (n *Node) Conn() *grpc.ClientConn { return n.conn }

// Limiter is the node's RateLimiter client.
func (n *Node) Limiter() pb.RateLimiterClient { return pb.NewRateLimiterClient(n.conn) }

// Admin is the node's Admin client.
func (n *Node) Admin() pb.AdminClient { return pb.NewAdminClient(n.conn) }

// WaitServing waits until the node reports SERVING on gRPC health.
func (n *Node) WaitServing(ctx context.Context) error {
	hc := healthpb.NewHealthClient(n.conn)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving: %w (last: %v)\n%s", n.ID, ctx.Err(), err, tail(n.Log(), 30))
		case <-n.Exited():
			return fmt.Errorf("%s exited:\n%s", n.ID, tail(n.Log(), 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops the process (if running) and closes the connection.
func (n *Node) Close() {
	n.Kill()
	n.conn.Close()
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
