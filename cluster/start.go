package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Start creates, joins or resumes a cluster and returns once the node is a
// member: a node with Raft state resumes it; a new node with Join addresses
// joins them; a new node without creates a single-node cluster.
func (n *Node) Start(ctx context.Context) error {
	defer close(n.started)
	has, err := n.metaGroup().hasState()
	if err != nil {
		return err
	}
	if has && !n.newIncarnation && !accepted(n.cfg.DataDir) {
		// Raft state the cluster never took this dir for: what peers
		// sent a refused start of a release whose Raft port opened
		// before the check (a member's lost dir started again under its
		// id), or a member's own whose mark was deleted. Nothing here
		// tells them apart, and discarding a member's votes and log is
		// what the incarnation guards against: the operator decides.
		return fmt.Errorf("%w: data-dir: %s holds Raft state but not %s: not known to be this dir's own; if the cluster refused this node (node.incarnation), empty the dir and start it again once the old member has left (floodgatectl leave %s)",
			ErrConfig, n.cfg.DataDir, acceptedFile, n.cfg.NodeID)
	}
	var resume []string
	if !has {
		resume = joiningVia(n.cfg.DataDir)
		// No Raft state, yet maybe a cluster file: a creation stopped
		// before its meta group held anything (bootstrap records the id
		// first), a cluster no peer knows, or a join stopped before the
		// meta log came (joinOnce records the cluster's id first). Kept,
		// the node would name it at every handshake and refuse the
		// cluster it joins (AdmitPeer), or create a cluster of the id of
		// the one it had joined (bootstrap).
		if err := forgetCluster(n.cfg.DataDir); err != nil {
			return fmt.Errorf("data-dir: %w", err)
		}
	}
	switch {
	case has:
		n.log.Info("resuming cluster membership from data dir", "dir", n.cfg.DataDir)
		cfg, err := n.metaGroup().configuration()
		if err != nil {
			return err
		}
		if len(cfg.Servers) == 1 && string(cfg.Servers[0].ID) == n.cfg.NodeID {
			// Alone in the meta group: a single-node cluster, or one whose
			// creation a crash interrupted. Every step of bootstrap is
			// idempotent, so running it finishes whatever was left.
			if err := n.bootstrap(ctx); err != nil {
				return err
			}
			if err := n.checkJoinTargets(ctx); err != nil {
				return err
			}
		} else if len(n.cfg.Join) > 0 {
			if err := n.checkResumeTargets(ctx); err != nil {
				return err
			}
			n.wg.Add(1)
			go n.announce()
		}
	case len(n.cfg.Join) > 0 && n.cfg.BootstrapExpect > 0:
		if err := n.joinOrBootstrap(ctx); err != nil {
			return err
		}
	case len(n.cfg.Join) > 0:
		if err := n.join(ctx, n.cfg.Join); err != nil {
			return err
		}
	case len(resume) > 0:
		// A join that stopped before the cluster's log arrived: the
		// cluster may list this node, so it must not create one of its
		// own unless a member refuses it (then nothing was taken).
		n.log.Warn("finishing a join that stopped before the cluster's log arrived", "via", strings.Join(resume, ","))
		err := n.joinVia(ctx, resume, "the unfinished join (data dir file "+joiningFile+") through")
		switch {
		case err != nil && joiningVia(n.cfg.DataDir) == nil:
			n.log.Warn("the unfinished join was refused: creating a cluster of this node's own", "err", err)
			if err := n.bootstrap(ctx); err != nil {
				return err
			}
		case err != nil:
			return err
		}
	default:
		if err := n.bootstrap(ctx); err != nil {
			return err
		}
	}
	if err := n.waitMember(ctx, !has); err != nil {
		return err
	}
	if err := joined(n.cfg.DataDir); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	for _, s := range ignoredSettings(n.asked, n.View()) {
		n.log.Warn(s)
	}
	if err := n.holdsPolicies(ctx); err != nil {
		return err
	}
	n.wg.Add(1)
	go n.watchCaughtUp()
	return nil
}

// waitMember waits until the meta state lists this node. A node that
// joins or creates its cluster (caughtUp) waits, besides, until its meta
// state has caught up with the leader's: a fresh node replays the meta
// log from its start, which lists a node that left and rejoins under the
// same --node-id once (its first membership) and then no more (its
// leave) before its rejoin; a node taken for a member on that first
// listing would then see itself removed, and stop. A resuming node is a
// member once its own data dir lists it (it cannot catch up with a leader
// that removed it meanwhile); whether it has been removed since is judged
// only once it has replayed its own log (metaReplayed).
func (n *Node) waitMember(ctx context.Context, caughtUp bool) error {
	hint := time.After(memberHintAfter)
	why := n.memberHint(!caughtUp)
	var behind error // why the last catch-up failed
	for {
		m := n.metaState()
		ch := m.Changed()
		if n.listed() {
			if !caughtUp {
				break
			}
			if behind = n.catchUpListed(ctx); behind == nil {
				break
			}
		}
		select {
		case <-hint:
			if behind != nil {
				n.log.Warn("listed as a member, but not caught up with the meta leader yet", "err", behind)
			} else {
				n.log.Warn("not a cluster member yet: " + why)
			}
		case <-ctx.Done():
			return fmt.Errorf("waiting to become a cluster member: %w (%s)", ctx.Err(), why)
		case <-n.stop:
			return ErrClosed
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if rec := n.View().Node(n.cfg.NodeID); n.newIncarnation && rec != nil {
		// A data dir made at this start, yet the cluster lists this id
		// already, from another dir: the member it lists lost its data,
		// and the Raft state this node holds reached it from its peers
		// since it opened (a resume). (A join an older meta leader took
		// carries this dir's incarnation: it cannot be told apart.)
		if err := checkIncarnation(rec, n.self()); err != nil {
			return err
		}
	}
	if err := n.accept(); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	if err := recordCluster(n.cfg.DataDir, n.View().ClusterID); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	n.mu.Lock()
	n.member = true
	n.mu.Unlock()
	return nil
}

// listed reports whether this node's meta state lists it.
func (n *Node) listed() bool {
	v := n.View()
	return v.Initialized() && v.Node(n.cfg.NodeID) != nil
}

// catchUpListed catches this node's meta state up with the meta leader's
// log as it is now, and reports why not, or why it no longer lists this
// node after it.
func (n *Node) catchUpListed(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, memberCatchUp)
	defer cancel()
	if err := n.CatchUpMeta(cctx); err != nil {
		return err
	}
	if !n.listed() {
		return errors.New("the caught-up meta state does not list this node")
	}
	return nil
}

// metaReplayed reports whether this node's meta state has applied every
// command its own meta log holds. A view taken before may be of an
// earlier incarnation of this node (its add and its leave, replayed ahead
// of its rejoin): neither a removal nor a group to start is judged on it.
func (n *Node) metaReplayed() bool {
	meta := n.metaGroup()
	return meta != nil && n.metaState().Seen() >= meta.lastCommand()
}

// removedFromMeta reports whether this node's meta state no longer lists
// it for good: it has replayed its own log (metaReplayed), or the meta
// group's configuration no longer holds it. The latter settles a removal
// whose last entries never committed here: a node taken out of the group
// hears no more commits, so its log may end in commands it never applies.
func (n *Node) removedFromMeta() bool {
	if n.metaReplayed() {
		return true
	}
	cfg, err := n.metaGroup().configuration()
	return err == nil && !slices.ContainsFunc(cfg.Servers, func(s raft.Server) bool { return string(s.ID) == n.cfg.NodeID })
}

// memberHintAfter is how long a node waits to become a member before it
// says what may be wrong (memberHint).
const (
	memberHintAfter = 15 * time.Second
	// memberCatchUp bounds one try at catching up (waitMember tries again).
	memberCatchUp = 2 * time.Second
)
