package cluster

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

const (
	// rateWindow is how far back an elastic policy's admitted rate looks,
	// in one-second buckets.
	rateWindow = 5
	// rateShare is how often a node gossips its rates, and rateStale how
	// long a node's last figures count after it stops sending them.
	rateShare = time.Second
	rateStale = 3 * rateShare
)

// rates measures how much cost each elastic policy admits across the
// cluster. Each node counts what the shards it leads admitted, over the
// last rateWindow seconds, and gossips its per-second rates to every other
// node once a second; a policy's cluster rate is the sum of every node's
// latest figure. An elastic policy has room to stretch while that sum is
// below its capacity.
type rates struct {
	mu     sync.Mutex
	local  map[string]*[rateWindow]int64 // policy → cost per second bucket
	start  int64                         // the second bucket 0 started at
	remote map[string]remoteRates        // node → its last message
}

type remoteRates struct {
	at    time.Time
	rates map[string]int64
}

// rateMessage is what nodes gossip.
type rateMessage struct {
	Node  string           `json:"node"`
	Rates map[string]int64 `json:"rates"` // policy → cost per second
}

func newRates() *rates {
	return &rates{local: map[string]*[rateWindow]int64{}, remote: map[string]remoteRates{}}
}

// admitted counts cost admitted under an elastic policy by a local leader.
func (r *rates) admitted(p *policy.Policy, cost int64, now time.Time) {
	if p.Mode != policy.Elastic || cost <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now.Unix())
	b := r.local[p.Name]
	if b == nil {
		b = new([rateWindow]int64)
		r.local[p.Name] = b
	}
	b[now.Unix()%rateWindow] += cost
}

// rotate clears the buckets of seconds that have passed since the last
// count. Callers hold mu.
func (r *rates) rotate(sec int64) {
	if sec <= r.start {
		return
	}
	for s := max(r.start+1, sec-rateWindow+1); s <= sec; s++ {
		for name, b := range r.local {
			b[s%rateWindow] = 0
			if *b == ([rateWindow]int64{}) {
				delete(r.local, name)
			}
		}
	}
	r.start = sec
}

// localRates returns this node's admitted cost per second for each policy.
func (r *rates) localRates(now time.Time) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now.Unix())
	out := make(map[string]int64, len(r.local))
	for name, b := range r.local {
		var sum int64
		for _, v := range b {
			sum += v
		}
		out[name] = sum / rateWindow
	}
	return out
}

// learn records a node's gossiped rates, and forgets the figures of
// nodes that stopped sending them.
func (r *rates) learn(node string, rates map[string]int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropStale(now)
	r.remote[node] = remoteRates{at: now, rates: rates}
}

// dropStale forgets the figures older than rateStale. Callers hold mu.
func (r *rates) dropStale(now time.Time) {
	for node, rr := range r.remote {
		if now.Sub(rr.at) > rateStale {
			delete(r.remote, node)
		}
	}
}

// cluster returns the policy's admitted cost per second across the
// cluster: this node's own figure plus every other node's latest.
func (r *rates) cluster(name string, now time.Time) int64 {
	total := r.localRates(now)[name]
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropStale(now)
	for _, rr := range r.remote {
		total += rr.rates[name]
	}
	return total
}

// room reports whether an elastic policy may stretch its limits now.
func (r *rates) room(p *policy.Policy, now time.Time) bool {
	return p.Mode == policy.Elastic && r.cluster(p.Name, now) < p.ElasticCapacity
}

// message encodes this node's rates for gossip; nil when it has none.
func (r *rates) message(node string, now time.Time) []byte {
	local := r.localRates(now)
	if len(local) == 0 {
		return nil
	}
	b, err := json.Marshal(rateMessage{Node: node, Rates: local})
	if err != nil {
		return nil
	}
	return b
}

// shareRates gossips this node's elastic rates (every rateShare).
func (n *Node) shareRates() {
	if msg := n.rates.message(n.cfg.NodeID, time.Now()); msg != nil {
		n.gossip.send(msg)
	}
}

// every calls fn every d until the node stops: one of the node's loops
// (n.wg).
func (n *Node) every(d time.Duration, fn func()) {
	defer n.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// learnRates takes in another node's gossiped rates (judgeRates).
func (n *Node) learnRates(b []byte) {
	if node, kept, ok := judgeRates(n.View(), n.cfg.NodeID, b); ok {
		n.rates.learn(node, kept, time.Now())
	}
}

// judgeRates decodes a rate message and keeps what may count. Gossip
// without a --gossip-key is not authenticated, so a message is judged as
// a peer's call would be: only another member's figures count (an
// invented node name would add a node to the sum, and to memory), and
// only for elastic policies the meta state v holds, each between 0 and
// the policy's capacity (a figure above it says no more than the
// capacity; a negative one, or a sum that wrapped, would make room under
// overload).
func judgeRates(v *fsm.MetaView, self string, b []byte) (node string, kept map[string]int64, ok bool) {
	var m rateMessage
	if err := json.Unmarshal(b, &m); err != nil || m.Node == self || v.Node(m.Node) == nil {
		return "", nil, false
	}
	kept = make(map[string]int64, min(len(m.Rates), len(v.Policies)))
	for name, rate := range m.Rates {
		if p := v.Policy(name); p != nil && p.Mode == policy.Elastic && rate > 0 {
			kept[name] = min(rate, p.ElasticCapacity)
		}
	}
	return m.Node, kept, true
}
