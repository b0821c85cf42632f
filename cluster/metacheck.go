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
	err = dryApply(dry, &raft.Log{Type: raft.LogCommand, Index: n.View().Index + 1, Data: cmd})
	if errors.Is(err, fsm.ErrCorrupt) || errors.Is(err, fsm.ErrUnknownEntry) {
		return fmt.Errorf("%w: command: %w", ErrConfig, err)
	}
	return err
}

// dryApply applies l to m, turning the panic with which the state machine
// stops on an entry it cannot interpret (fsm.ErrUnknownEntry) into an
// error. That one matters most: logged, it would stop every replica.
func dryApply(m *fsm.Meta, l *raft.Log) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok && errors.Is(e, fsm.ErrUnknownEntry) {
				err = e
				return
			}
			panic(r)
		}
	}()
	err, _ = m.Apply(l).(error)
	return err
}

// memSink is a raft.SnapshotSink in memory, for checkMeta's copy.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "dry-run" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }
