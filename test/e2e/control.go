package e2e

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// NewNodeAt prepares (does not start) a node listening on host with fixed
// ports (port, port+1, port+2, port+3 for gRPC, HTTP, Raft and gossip).
// It is for nodes placed in their own network namespace, where every port
// is free; bin.Floodgate may be a wrapper that enters the namespace and
// execs the real binary, so the started process is still the node.
func NewNodeAt(bin Binaries, dir, id, host string, port int, args ...string) (*Node, error) {
	n := &Node{ID: id, Dir: filepath.Join(dir, id), Args: args, bin: bin.Floodgate, logPath: filepath.Join(dir, id+".log")}
	for i, p := range []*string{&n.GRPC, &n.HTTP, &n.Raft, &n.Gossip} {
		*p = net.JoinHostPort(host, strconv.Itoa(port+i))
	}
	var err error
	if n.conn, err = grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	return n, nil
}

// Signal sends sig to the running process without waiting: SIGSTOP and
// SIGCONT pause and resume it in place.
func (n *Node) Signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil {
		return errors.New(n.ID + " not running")
	}
	return cmd.Process.Signal(sig)
}

// ExitCode returns the exit code of the process once it has exited by
// itself (-1 while it runs, after Kill or Stop, or when a signal ended it).
func (n *Node) ExitCode() int {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return -1
	}
	select {
	case <-exited: // Wait has filled in ProcessState
		return cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}
