package cluster

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strings"
)

// slogWriter turns the text lines of a library's logger (hashicorp/raft's
// hclog, memberlist's log.Logger: "[WARN] memberlist: ...") into slog
// records at the level the line's tag says, so they reach the node's log
// in its format (text or JSON).
type slogWriter struct {
	log    *slog.Logger
	prefix string
}

func (w *slogWriter) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(string(p)))
	for sc.Scan() {
		line := sc.Text()
		w.log.Log(context.Background(), levelOf(line), w.prefix+line)
	}
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)

// levelOf reads a line's level tag. Elections, a new replica catching up,
// a peer that has not opened its replica of the group yet (a join, a new
// group: the leader's AppendEntries fail until it has, dozens of ERROR
// lines in a normal join), a server's address taken from the group's
// configuration (the meta state that addrBook reads is not loaded yet)
// and gossip's routine chatter are how the libraries work: debug, not
// warnings.
func levelOf(line string) slog.Level {
	switch {
	case strings.Contains(line, "raftnet: no group "):
		return slog.LevelDebug
	case strings.Contains(line, "[ERROR]"), strings.Contains(line, "[ERR]"):
		return slog.LevelError
	case strings.Contains(line, "starting election"), strings.Contains(line, "pre-vote"),
		strings.Contains(line, "no known peers"), strings.Contains(line, "failed to get previous log"),
		strings.Contains(line, "sending older logs"), strings.Contains(line, "unable to get address for server"), strings.Contains(line, "[DEBUG]"), strings.Contains(line, "[TRACE]"):
		return slog.LevelDebug
	case strings.Contains(line, "[INFO]"):
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
