package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/floodgate/floodgate/cluster"
)

// checkStoreFlag runs the daemon as a checker of one Raft log file: bolt
// panics on some damage, which only a process boundary contains.
const checkStoreFlag = "--check-store"

// runCheckStore handles `floodgate --check-store PATH` and reports whether
// args asked for it.
func runCheckStore(args []string) bool {
	if len(args) != 2 || args[0] != checkStoreFlag {
		return false
	}
	if err := cluster.CheckStore(args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// checkInChild checks the Raft log at path in a child process.
func checkInChild(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.Command(self, checkStoreFlag, path)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			msg := strings.TrimSpace(out.String())
			if i := strings.IndexByte(msg, '\n'); i > 0 {
				msg = msg[:i] // a panic's first line says what bolt found
			}
			return errors.New(msg)
		}
		return err
	}
	return nil
}
