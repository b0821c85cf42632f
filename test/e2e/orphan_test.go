package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanEnv names the binary a helper process (this test binary run again)
// starts a node of; orphanDirEnv its data dir.
const (
	orphanEnv    = "FLOODGATE_E2E_ORPHAN_BIN"
	orphanDirEnv = "FLOODGATE_E2E_ORPHAN_DIR"
)

// runOrphanHelper is the helper process: it starts one node through the
// harness, prints the node's pid, and waits to be killed.
func runOrphanHelper() {
	n, err := NewNode(Binaries{Floodgate: os.Getenv(orphanEnv)}, os.Getenv(orphanDirEnv), "n1")
	if err == nil {
		err = n.Start()
	}
	if err == nil { // serving: it would not exit on its own meanwhile
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = n.WaitServing(ctx)
		cancel()
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("pid", n.cmd.Process.Pid)
	time.Sleep(time.Hour) // until killed
}

// A node started by the harness dies with the process that started it: a
// test binary killed from outside (go test's timeout, ^C, kill -9) used to
// leave its nodes running for hours, holding ports and data dirs.
func TestNodesDieWithTheHarness(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux only")
	}
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), orphanEnv+"="+bin.Floodgate, orphanDirEnv+"="+t.TempDir())
	helper.SysProcAttr = dieWithParent() // this test killed, the helper goes too
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper: %v", err)
	}
	pidText, ok := strings.CutPrefix(strings.TrimSpace(line), "pid ")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper said %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // if the test fails
	if !alive(pid) {
		t.Fatalf("node %d is not running before the helper is killed", pid)
	}
	helper.Process.Kill()
	helper.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d still runs 10s after the process that started it was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid runs: it exists and is not a zombie waiting
// for a parent (init, in a container, may never reap it).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
