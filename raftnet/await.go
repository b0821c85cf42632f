package raftnet

import (
	"errors"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Why a replicating AppendEntries waits for a peer it cannot reach,
// instead of failing at once: hashicorp/raft backs replication to a
// follower off after each failed AppendEntries, doubling the pause up to
// about 10s, and only a successful AppendEntries ends the backoff. A peer
// down for half a minute was therefore first replicated to again up to
// 10s after it came back: a restarted node caught up that late (its start
// waits for the meta log), and while it had not, a group of three that
// lost another replica had no quorum. A call that waits fails once per
// wait at most, so the backoff stays at its first steps, and the call is
// sent the moment the peer answers a dial. It was built before the wait,
// with the entries up to then only, and once it succeeded raft pipelined
// the entries written during the outage 64 a round, one round per new
// entry or per commit timeout (a second for the groups:
// cluster/group.go): a follower back from a minute down at 10 entries a
// second caught up 15 s after its return. So the next pipeline to that
// peer is refused once (raft.ErrPipelineReplicationNotSupported: raft
// then replicates in plain calls, which send every entry up to the
// leader's last before raft pipelines again). Heartbeats keep failing at
// once (raft counts contact by them), and so do votes.

// setBack notes that a call to id waited for it and found it back: its
// next pipeline is refused.
func (t *Transport) setBack(id raft.ServerID) {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	if t.back == nil {
		t.back = map[raft.ServerID]bool{}
	}
	t.back[id] = true
}

// takeBack reports, once, whether a call to id found it back after a wait.
func (t *Transport) takeBack(id raft.ServerID) bool {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	back := t.back[id]
	delete(t.back, id)
	return back
}

// redialEvery is how often a waiting call tries its peer again; the
// calls of a node's groups waiting for the same peer take turns, so the
// peer is dialed once in that time, not once per group.
const redialEvery = 100 * time.Millisecond

// Await makes the transport's replicating AppendEntries wait for a peer
// it cannot reach, up to Config.PeerWait, while leading reports true (it
// is asked every redialEvery). Give it the group's raft state: raft waits
// for its replication to return before it shuts down, so a wait must end
// when raft stops leading, which its shutdown does first.
func (t *Transport) Await(leading func() bool) {
	t.hbMu.Lock()
	t.leading = leading
	t.hbMu.Unlock()
}

func (t *Transport) leadingFunc() func() bool {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	return t.leading
}

// unreached reports whether route's err means the peer could not be
// reached (a dial or handshake that failed), which a wait may outlast;
// not a closed transport, nor a peer that does not speak raftnet, nor
// one of another cluster (a wait would dial it ten times a second, where
// raft's backoff calls a dead peer less and less often).
func unreached(err error) bool {
	return err != nil && !errors.Is(err, raft.ErrTransportShutdown) && !errors.Is(err, errNotSpoken) &&
		!errors.Is(err, ErrOtherCluster)
}

// dialFailed reports whether a NetworkTransport call failed at its dial:
// the peer could not be reached at all, it did not answer.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// forgetLegacy forgets that addr closed the handshake: its next call
// tries raftnet.
func (n *Network) forgetLegacy(addr raft.ServerAddress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.legacy, addr)
}

// await routes a replicating AppendEntries whose route failed with err
// (unreached): it waits for the peer as Await allows, and returns route's
// last result.
func (t *Transport) await(id raft.ServerID, target raft.ServerAddress, err error) (*link, error) {
	leading := t.leadingFunc()
	if leading == nil {
		return nil, err
	}
	deadline := time.NewTimer(t.n.cfg.PeerWait)
	defer deadline.Stop()
	tick := time.NewTicker(redialEvery)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			return nil, err
		case <-t.closed:
			return nil, raft.ErrTransportShutdown
		case <-t.n.stop:
			return nil, raft.ErrTransportShutdown
		case <-tick.C:
		}
		if !leading() {
			return nil, err
		}
		if !t.n.mayDial(t.resolve(id, target)) {
			continue
		}
		l, rerr := t.route(id, target)
		if !unreached(rerr) {
			return l, rerr
		}
		err = rerr
	}
}

// mayDial reports whether a waiting call may try addr now: a live link
// is there to use, or no waiting call has dialed it in the last
// redialEvery (this one takes the turn).
func (n *Network) mayDial(addr raft.ServerAddress) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l := n.links[addr]; l != nil && l.alive() {
		return true
	}
	now := time.Now()
	if at, ok := n.tried[addr]; ok && now.Sub(at) < redialEvery {
		return false
	}
	n.tried[addr] = now
	return true
}
