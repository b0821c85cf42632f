package cluster

import (
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Gossip health of a node, as status reports it.
const (
	HealthAlive   = "alive"
	HealthSuspect = "suspect"
	HealthDead    = "dead"
	HealthUnknown = "unknown"
)

// gossipMeta is the metadata every node gossips about itself, so a node
// can be reached before the meta group knows it.
type gossipMeta struct {
	GRPC   string `json:"grpc"`
	Raft   string `json:"raft"`
	Region string `json:"region,omitempty"`
	// Incarnation is the node's data dir's (empty from releases before
	// it): gossip takes no node for a member of another (notMember).
	Incarnation string `json:"incarnation,omitempty"`
}

// gossip runs memberlist: it finds nodes and notices when they fail.
type gossip struct {
	ml      *memberlist.Memberlist
	keyring *memberlist.Keyring // nil: plaintext
	self    string
	meta    []byte
	log     *slog.Logger
	start   time.Time

	mu sync.Mutex
	// down records since when each node has been dead or gone.
	down map[string]time.Time
	// at is the gossip address (ip:port) of each node alive or suspect,
	// copied in memberlist's events: it rewrites a node's address in
	// place, under its own lock.
	at     map[string]string
	events chan struct{}
	// onMsg receives the messages other nodes send (their rates).
	onMsg func([]byte)
	// recorded is the incarnation the meta state records for member id
	// ("" for none), and whether it lists id at all.
	recorded func(id string) (string, bool)
}

// hostPort splits host:port with a numeric port.
func hostPort(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	return host, port, err
}

func startGossip(cfg Config, incarnation string, recorded func(id string) (string, bool), onMsg func([]byte)) (*gossip, error) {
	host, port, err := hostPort(cfg.GossipAddr)
	if err != nil {
		return nil, err
	}
	bindHost, bindPort, err := hostPort(cfg.GossipBind)
	if err != nil {
		return nil, err
	}
	meta, err := json.Marshal(gossipMeta{GRPC: cfg.GRPCAddr, Raft: cfg.RaftAddr, Region: cfg.Region, Incarnation: incarnation})
	if err != nil {
		return nil, err
	}
	g := &gossip{self: cfg.NodeID, meta: meta, log: cfg.Logger, start: time.Now(), down: map[string]time.Time{}, at: map[string]string{},
		events: make(chan struct{}, 1), onMsg: onMsg, recorded: recorded}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeID
	mc.BindAddr, mc.BindPort = bindHost, bindPort
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	gi := cfg.GossipInterval
	// Gossip rounds only spread memberlist's own news (joins, suspicions,
	// deaths; rates go straight to each node), and that news also rides
	// every probe: a round per probe is plenty, where five were the most
	// frequent wakeup of an idle node after Raft's.
	mc.GossipInterval = 5 * gi
	mc.ProbeInterval = 5 * gi
	mc.ProbeTimeout = 5 * gi / 2
	mc.SuspicionMult = 4
	mc.PushPullInterval = 75 * gi
	mc.Delegate = g
	if len(cfg.GossipKeys) > 0 {
		// Every gossip message is encrypted and authenticated: a sender
		// without the key can neither read the cluster's state nor forge
		// a member or a rate message.
		if g.keyring, err = memberlist.NewKeyring(cfg.GossipKeys[1:], cfg.GossipKeys[0]); err != nil {
			return nil, fmt.Errorf("%w: gossip key: %w", ErrConfig, err)
		}
		mc.Keyring = g.keyring
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.Events = g
	mc.Alive = g
	// memberlist logs through the standard logger: into ours, at the
	// level of each line's tag.
	mc.Logger = log.New(&slogWriter{log: cfg.Logger, prefix: "gossip: "}, "", 0)
	if g.ml, err = memberlist.Create(mc); err != nil {
		return nil, err
	}
	return g, nil
}

// join contacts existing members at addrs (gossip addresses).
func (g *gossip) join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	_, err := g.ml.Join(addrs)
	return err
}

// health returns a node's gossip health and, when dead, since when.
func (g *gossip) health(id string) (string, time.Time) {
	for _, m := range g.ml.Members() {
		if m.Name != id {
			continue
		}
		switch m.State {
		case memberlist.StateAlive:
			return HealthAlive, time.Time{}
		case memberlist.StateSuspect:
			return HealthSuspect, time.Time{}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if since, ok := g.down[id]; ok {
		return HealthDead, since
	}
	// Never seen since this node started: unknown, counted as down since
	// then, so a node that died while everyone restarted is still noticed.
	return HealthUnknown, g.start
}

// alive reports whether the node is reachable by gossip (alive or suspect).
func (g *gossip) alive(id string) bool {
	h, _ := g.health(id)
	return h == HealthAlive || h == HealthSuspect
}

// aliveAt reports the gossip address (host:port) the node called id is
// alive or suspect at, when gossip sees it so.
func (g *gossip) aliveAt(id string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.at[id]
	return at, ok
}

// notify wakes whoever waits on events, without blocking.
func (g *gossip) notify() { signal(g.events) }

// NotifyJoin implements memberlist.EventDelegate.
func (g *gossip) NotifyJoin(n *memberlist.Node) {
	g.mu.Lock()
	delete(g.down, n.Name)
	g.at[n.Name] = n.Address()
	g.mu.Unlock()
	g.notify()
}

// NotifyLeave implements memberlist.EventDelegate.
func (g *gossip) NotifyLeave(n *memberlist.Node) {
	g.mu.Lock()
	g.forgetStrangers()
	g.down[n.Name] = time.Now()
	delete(g.at, n.Name)
	g.mu.Unlock()
	if n.Name != g.self {
		g.log.Info("gossip: node down", "node", n.Name)
	}
	g.notify()
}

// forgetStrangers drops the down times of nodes the meta state does not
// list (members that left for good, names gossip made up): a node outlives
// every name that ever gossiped with it. g.mu is held.
func (g *gossip) forgetStrangers() {
	if g.recorded == nil {
		return
	}
	for id := range g.down {
		if _, member := g.recorded(id); !member {
			delete(g.down, id)
		}
	}
}

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossip) NotifyUpdate(n *memberlist.Node) {
	g.mu.Lock()
	g.at[n.Name] = n.Address()
	g.mu.Unlock()
	g.notify()
}

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	if len(g.meta) > limit {
		return nil
	}
	return g.meta
}

// NotifyAlive implements memberlist.AliveDelegate: news that a node is
// alive is ignored when the node is not the member whose name it has
// (notMember), so it is never taken for that member, alive.
func (g *gossip) NotifyAlive(n *memberlist.Node) error { return g.notMember(n.Name, n.Meta) }

// notMember refuses a node named as a member whose data dir it does not
// have: its gossiped incarnation is not the one the meta state records.
// memberlist knows neither clusters nor data dirs: two clusters that
// share a gossip key (or have none) merge into one pool as soon as a
// node of one contacts one of the other (a dead member's address reused,
// as pods' are, which rejoinGossip keeps asking), and a node of the other
// named as a member (pods of two StatefulSets share their names) read as
// that member alive: a dead one was marked active again and given
// replicas. A node of a release before incarnations, a member recorded
// without one, and a name the meta state does not list are taken.
func (g *gossip) notMember(name string, meta []byte) error {
	if name == g.self || g.recorded == nil {
		return nil
	}
	var m gossipMeta
	if json.Unmarshal(meta, &m) != nil || m.Incarnation == "" {
		return nil
	}
	if rec, _ := g.recorded(name); rec != "" && rec != m.Incarnation {
		return fmt.Errorf("not member %s: its data dir is another (incarnation %s, the member's %s)", name, m.Incarnation, rec)
	}
	return nil
}

// NotifyMsg implements memberlist.Delegate: a message from another node.
func (g *gossip) NotifyMsg(b []byte) {
	if g.onMsg != nil && len(b) > 0 {
		g.onMsg(b)
	}
}

// send sends msg to every other alive member, best effort (UDP): a lost
// message is replaced by the next one.
func (g *gossip) send(msg []byte) {
	for _, m := range g.ml.Members() {
		if m.Name != g.self && m.State == memberlist.StateAlive {
			_ = g.ml.SendBestEffort(m, msg)
		}
	}
}

// GetBroadcasts implements memberlist.Delegate.
func (g *gossip) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (g *gossip) LocalState(bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (g *gossip) MergeRemoteState([]byte, bool) {}

// close leaves the gossip pool politely, then stops.
func (g *gossip) close() {
	_ = g.ml.Leave(time.Second)
	_ = g.ml.Shutdown()
}

// probeGossip fails when the gossip port (TCP and UDP, as memberlist
// binds both) is taken, before the data dir is claimed (see Open).
// memberlist binds it later, itself; a port taken in between still fails
// there. Port 0 picks a free port and is not probed.
func probeGossip(bind string) error {
	_, port, err := net.SplitHostPort(bind)
	if err != nil || port == "0" {
		return nil // a malformed address is refused by Validate
	}
	tl, err := net.Listen("tcp", bind)
	if err != nil {
		return fmt.Errorf("%w: gossip-addr: %w", ErrConfig, err)
	}
	defer tl.Close()
	ul, err := net.ListenPacket("udp", bind)
	if err != nil {
		return fmt.Errorf("%w: gossip-addr: %w", ErrConfig, err)
	}
	return ul.Close()
}
