package clockcheck

import (
	"slices"
	"time"
)

// Sample is one reading of a peer's clock: the peer read Remote between
// this node's sending the question at Sent and its receiving the answer
// at Received (both on this node's clock).
type Sample struct {
	Sent, Received, Remote time.Time
}

// Offset is how far the peer's clock is ahead of this node's (negative:
// behind), taking the peer to have read it half-way through the round
// trip; uncertainty is the most that guess can be off by (half the round
// trip).
func (s Sample) Offset() (offset, uncertainty time.Duration) {
	rtt := s.Received.Sub(s.Sent)
	if rtt < 0 {
		rtt = 0
	}
	mid := s.Sent.Add(rtt / 2)
	return s.Remote.Round(0).Sub(mid.Round(0)), rtt / 2
}

// Verdict counts the cluster's clocks against this node's.
type Verdict struct {
	// Agree counts the nodes whose clocks may be within the bound of
	// this node's, this node included; Disagree those surely beyond it.
	// Peers not measured count in neither.
	Agree, Disagree int
	// Sure counts the nodes whose clocks are surely within the bound of
	// this node's, even after the round trip's uncertainty, this node
	// included: what InStep counts.
	Sure int
	// Nodes is the cluster's size, this node included, measured or not.
	Nodes int
	// Median is the median of the peers' offsets (0 without samples): how
	// far the cluster's clocks are ahead of this node's.
	Median time.Duration
}

// Judge measures samples, one per peer that answered, against bound, the
// largest offset allowed between two nodes' clocks; peers is how many
// other members the cluster has, answered or not. A peer disagrees only
// when its offset is beyond bound even after the round trip's uncertainty:
// a slow answer never condemns a clock.
func Judge(samples []Sample, peers int, bound time.Duration) Verdict {
	v := Verdict{Agree: 1, Sure: 1, Nodes: max(peers, len(samples)) + 1}
	offsets := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		off, unc := s.Offset()
		offsets = append(offsets, off)
		if abs(off)-unc > bound {
			v.Disagree++
		} else {
			v.Agree++
		}
		if abs(off)+unc <= bound {
			v.Sure++
		}
	}
	if len(offsets) > 0 {
		slices.Sort(offsets)
		n := len(offsets)
		v.Median = offsets[n/2]
		if n%2 == 0 {
			v.Median = offsets[n/2-1] + (offsets[n/2]-offsets[n/2-1])/2
		}
	}
	return v
}

// Outlier reports whether this node's clock is the one that is off: a
// majority of the whole cluster, this node included, is surely beyond
// the bound. Members that did not answer (paused, cut off, of an older
// release) count for this node, so a few skewed nodes it alone reaches
// never condemn it; two nodes that disagree are a tie, and neither is the
// outlier: nobody can tell which is right.
func (v Verdict) Outlier() bool { return 2*v.Disagree > v.Nodes }

// InStep reports whether this node's clock is the cluster's: a majority
// of the whole cluster, this node included, is surely within the bound of
// it, slow answers counting against. Members that did not answer count
// against it here, unlike in Outlier: a node's stamps follow a step of its
// clock only once a majority has seen the new time (wallclock.Guard), and
// a node alone follows its own.
func (v Verdict) InStep() bool { return 2*v.Sure > v.Nodes }

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
