package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
)

// checkMeta applies cmd, a meta command a peer sent, to a copy of this
// node's meta state and returns the state machine's verdict. A command
// the state machine would refuse is then refused before it takes a place
// in the log: bad input changes nothing, the log included. It uses the
// state machine itself (through a snapshot), so the rules stay in fsm.
// A malformed command comes back as ErrConfig naming "command".
func (n *Node) checkMeta(cmd []byte) error {
	if len(cmd) == 0 {
		return fmt.Errorf("%w: command: empty", ErrConfig)
	}
	snap, err := n.metaState().Snapshot()
	if err != nil {
		return err
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		return err
	}
	dry := fsm.NewMeta()
	if err := dry.Restore(io.NopCloser(&sink.Buffer)); err != nil {
		return err
	}
	res := dry.Apply(&raft.Log{Type: raft.LogCommand, Index: n.View().Index + 1, Data: cmd})
	err, _ = res.(error)
	if errors.Is(err, fsm.ErrCorrupt) {
		return fmt.Errorf("%w: command: %w", ErrConfig, err)
	}
	return err
}

// memSink is a raft.SnapshotSink in memory, for checkMeta's copy.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "dry-run" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }
