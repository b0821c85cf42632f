package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/fsm"
)

// dnsPrefix marks a join address that stands for every address a name
// resolves to.
const dnsPrefix = "dns:"

// CheckJoinAddr is CheckAddr for a --join entry, which may also be
// "dns:name:port".
func CheckJoinAddr(field, addr string) error {
	if rest, ok := strings.CutPrefix(addr, dnsPrefix); ok {
		return CheckAddr(field, rest)
	}
	return CheckAddr(field, addr)
}

// resolveJoin expands the dns: entries of addrs into the addresses their
// names resolve to now, leaving out this node's own gRPC address. A name
// that does not resolve yet (pods not scheduled) contributes nothing, and
// its error is returned beside the addresses found.
func (n *Node) resolveJoin(ctx context.Context, addrs []string) ([]string, error) {
	var out []string
	var errs []error
	for _, a := range addrs {
		rest, ok := strings.CutPrefix(a, dnsPrefix)
		if !ok {
			out = append(out, a)
			continue
		}
		host, port, _ := net.SplitHostPort(rest)
		r := n.cfg.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := r.LookupHost(lctx, host)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		slices.Sort(ips)
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, port))
		}
	}
	out = slices.DeleteFunc(out, func(a string) bool { return a == n.cfg.GRPCAddr })
	return slices.Compact(out), errors.Join(errs...)
}

// joinOrBootstrap starts a node of a fleet started with the same
// arguments (--join, --bootstrap-expect N). At each attempt it joins any
// join address that belongs to a cluster; when none does, every address
// answered, it sees at least N fresh nodes (itself included) and its id
// is the smallest of all it sees, it creates the cluster, which the
// others then join. With N the fleet's initial size, every node sees the same N
// ids before anyone creates, so exactly one does; a node that starts later
// finds the cluster and joins. An address that does not answer may be a
// member down or restarting, and one whose cluster cannot take the node
// yet (no meta leader) is a cluster: new nodes added meanwhile (a
// StatefulSet scaled up during an outage) would otherwise create a second
// cluster behind the same Service, each counting on its own.
func (n *Node) joinOrBootstrap(ctx context.Context) error {
	start := time.Now()
	var last error
	for attempt := 1; ; attempt++ {
		addrs, err := n.resolveJoin(ctx, n.cfg.Join)
		last = err
		fresh := []string{n.cfg.NodeID}
		// Addresses that hold creation back: silent ones (members, for all
		// this node knows) and members that could not take it yet.
		holding := 0
		for _, addr := range addrs {
			hctx, cancel := context.WithTimeout(ctx, joinAttemptTimeout)
			id, clusterID, err := n.peers.Hello(hctx, addr)
			cancel()
			switch {
			case err != nil:
				holding++
				last = fmt.Errorf("%s: %w", addr, err)
			case id == n.cfg.NodeID:
				// This node, under another address.
			case clusterID == "":
				fresh = append(fresh, id)
			default:
				if err := markJoining(n.cfg.DataDir, []string{addr}); err != nil {
					return fmt.Errorf("data-dir: recording the join: %w", err)
				}
				refused, err := n.joinOnce(ctx, addr)
				if err == nil {
					return nil
				}
				if refused {
					_ = joined(n.cfg.DataDir) // nothing was taken
					return fmt.Errorf("--join %s refused this node: %w", addr, err)
				}
				holding++ // a member that cannot take it yet (no meta leader): a cluster is there
				last = fmt.Errorf("%s: %w", addr, err)
			}
		}
		slices.Sort(fresh)
		fresh = slices.Compact(fresh)
		if len(fresh) >= n.cfg.BootstrapExpect && fresh[0] == n.cfg.NodeID && holding == 0 {
			n.log.Info("creating the cluster: the smallest id of the nodes expected", "expect", n.cfg.BootstrapExpect, "nodes", strings.Join(fresh, ","))
			return n.bootstrap(ctx)
		}
		wait := backoff(attempt, 500*time.Millisecond, 5*time.Second)
		msg, level := "waiting for the cluster to form", slog.LevelInfo
		if len(fresh) >= n.cfg.BootstrapExpect && fresh[0] == n.cfg.NodeID {
			// This node would create it but for them: say so, an address
			// that never answers (a dead entry in --join) holds it for good.
			msg, level = "not creating the cluster: some --join addresses did not answer, or belong to a cluster that cannot take this node yet", slog.LevelWarn
		}
		n.log.Log(ctx, level, msg, "expect", n.cfg.BootstrapExpect, "fresh", strings.Join(fresh, ","),
			"holding", holding, "join", strings.Join(n.cfg.Join, ","), "attempt", attempt, "retry_in", wait, "last_err", last)
		select {
		case <-ctx.Done():
			return fmt.Errorf("--join %s: no cluster formed in %s with --bootstrap-expect %d (saw %d fresh nodes): %w; last error: %v",
				strings.Join(n.cfg.Join, ","), time.Since(start).Round(time.Second), n.cfg.BootstrapExpect, len(fresh), ctx.Err(), last)
		case <-n.stop:
			return ErrClosed
		case <-time.After(wait):
		}
	}
}

// checkJoinTargets refuses --join addresses that belong to another
// cluster when this node resumes a cluster of its own alone: the likely
// mistake of a first start without --join. Joining would need an empty
// data dir; resuming silently would run two limiters where the operator
// meant one. Unreachable addresses, fresh nodes and members of this
// node's own cluster (a fleet started with --bootstrap-expect) pass.
func (n *Node) checkJoinTargets(ctx context.Context) error {
	own := n.metaState().View().ClusterID
	if len(n.cfg.Join) == 0 || own == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, joinCheckTimeout) // for all of it
	defer cancel()
	addrs, _ := n.resolveJoin(ctx, n.cfg.Join)
	for _, addr := range addrs {
		id, other, err := n.peers.Hello(ctx, addr)
		if err == nil && id != n.cfg.NodeID && other != "" && other != own {
			return fmt.Errorf("%w: join: %s belongs to cluster %s, but this data dir holds cluster %s, of this node alone: "+
				"start without --join to resume %s, or with an empty --data-dir to join %s", ErrConfig, addr, other, own, own, other)
		}
	}
	return nil
}

// checkResumeTargets refuses to resume when this node's --join addresses
// answer as members of another cluster and none as a member of its own:
// its announce would make it a member of both. One stale address (a
// reused IP) beside members of its own cluster is only skipped by the
// announce. The addresses are asked at once, so one that does not answer
// costs joinCheckTimeout at most, not that for each.
func (n *Node) checkResumeTargets(ctx context.Context) error {
	own := n.ownCluster()
	if own == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, joinCheckTimeout) // for all of it
	defer cancel()
	addrs, _ := n.resolveJoin(ctx, n.cfg.Join)
	clusters := make([]string, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { clusters[i] = n.clusterAt(ctx, addr) })
	}
	wg.Wait()
	if slices.Contains(clusters, own) {
		return nil
	}
	for i, c := range clusters {
		if c != "" {
			return otherClusterError(addrs[i], c, own)
		}
	}
	return nil
}

// joinCheckTimeout bounds checkJoinTargets and checkResumeTargets, all addresses together: a
// node resuming its own cluster must not wait long on unreachable ones.
const joinCheckTimeout = 2 * time.Second

// refusedJoin reports whether a member's answer to AddNode is final: this
// node's id, addresses or credentials are refused, and asking again would
// get the same answer.
func refusedJoin(err error) bool {
	return errors.Is(err, ErrConfig) || errors.Is(err, fsm.ErrRefused) || errors.Is(err, ErrDenied)
}

// joinOnce asks the member at addr to add this node and joins its gossip.
// refused means the answer is final.
func (n *Node) joinOnce(ctx context.Context, addr string) (refused bool, err error) {
	// Bounded per member, so a blackholed address cannot hold up the
	// others for the whole join.
	actx, cancel := context.WithTimeout(ctx, joinAttemptTimeout)
	cid, gossipAddrs, err := n.peers.AddNode(actx, addr, n.self(), ProveGossipKey(n.gossipKey(), n.cfg.NodeID))
	cancel()
	if err != nil {
		return refusedJoin(err), err
	}
	if err := n.gossip.join(gossipAddrs); err != nil {
		n.log.Warn("join gossip", "err", err)
	}
	// The cluster that took this node, named from the moment its Raft
	// port takes peers (accept), as bootstrap does its own: not only once
	// its meta log arrives, a node of another cluster still calling this
	// address would be let into its groups meanwhile (AdmitPeer).
	if err := recordCluster(n.cfg.DataDir, cid); err != nil {
		return true, fmt.Errorf("data-dir: recording the join: %w", err)
	}
	if err := n.accept(); err != nil {
		return true, fmt.Errorf("data-dir: recording the join: %w", err)
	}
	n.log.Info("joined cluster", "cluster", cid, "via", addr)
	return false, nil
}

// announce tells the cluster, through the --join addresses, where a
// restarted member is now. A pod rescheduled with a new IP keeps its data
// and id, but the others would go on dialing its old address, and it
// cannot learn the cluster's state from a leader that cannot reach it:
// adding a known node again only updates its addresses. It gives up once
// one member took it, or when the node stops.
func (n *Node) announce() {
	defer n.wg.Done()
	ctx, cancel := n.untilStop(context.Background())
	defer cancel()
	for attempt := 1; ; attempt++ {
		addrs, _ := n.resolveJoin(ctx, n.cfg.Join)
		for _, addr := range addrs {
			hctx, hcancel := context.WithTimeout(ctx, joinAttemptTimeout)
			if err := n.otherCluster(hctx, addr); err != nil {
				// Unreachable at start, of another cluster now: never
				// asked to add this node (it is not ready meanwhile).
				hcancel()
				n.refused.Store(&err)
				n.log.Error("a --join address belongs to another cluster: not announcing this node there", "via", addr, "err", err)
				continue
			}
			hcancel()
			actx, acancel := context.WithTimeout(ctx, joinAttemptTimeout)
			_, _, err := n.peers.AddNode(actx, addr, n.self(), ProveGossipKey(n.gossipKey(), n.cfg.NodeID))
			acancel()
			if err == nil {
				n.refused.Store(nil)
				n.log.Info("told the cluster this node's addresses", "via", addr)
				return
			}
			if refusedJoin(err) {
				// Not ready meanwhile: a rolling restart must stop at this
				// node rather than go on to the next.
				n.refused.Store(&err)
			}
			if refusedJoin(err) || errors.Is(err, ErrMemberAlive) {
				// Said at once: an operator must act (or, for a member seen
				// alive at its old address, wait for gossip).
				n.log.Warn("the cluster refused this node's addresses; retrying", "via", addr, "err", err)
			} else {
				n.log.Debug("announce", "via", addr, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff(attempt, 500*time.Millisecond, 5*time.Second)):
		}
	}
}

// Refused returns the cluster's refusal of this restarted member's
// announce (a --gossip-key the cluster does not share, say), nil while
// there is none. An operator must act; until then the node is not ready.
func (n *Node) Refused() error {
	if err := n.refused.Load(); err != nil {
		return *err
	}
	return nil
}
