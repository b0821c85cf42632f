package cluster

import (
	"testing"

	"github.com/hashicorp/raft"
)

func voter(id string) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1"), Suffrage: raft.Voter}
}

func nonvoter(id string) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1"), Suffrage: raft.Nonvoter}
}

// Each rule of the shard reconciler, one step at a time, in the order
// that keeps a quorum of up-to-date voters through every change.
func TestPlanShard(t *testing.T) {
	addrs := map[string]string{"n1": "n1:1", "n2": "n2:1", "n3": "n3:1", "n4": "n4:1", "n5": "n5:1"}
	for _, tc := range []struct {
		name     string
		servers  []raft.Server
		desired  []string
		addrs    map[string]string
		dead     []string
		caughtUp []string
		settled  bool
		want     shardStep
	}{
		{name: "settled, led by its preferred leader", servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			desired: []string{"n1", "n2", "n3"}, settled: true, want: shardStep{}},
		{name: "no placement: change nothing", servers: []raft.Server{voter("n1")}, desired: nil, want: shardStep{}},
		{name: "a server's raft address moved", servers: []raft.Server{voter("n1"), voter("n2"), nonvoter("n3")},
			desired: []string{"n1", "n2", "n3"}, addrs: map[string]string{"n1": "n1:1", "n2": "n2:1", "n3": "n3:9"},
			want: shardStep{kind: stepReaddress, id: "n3", addr: "n3:9"}},
		{name: "the leader's own address is never rewritten", servers: []raft.Server{voter("n1"), voter("n2")},
			desired: []string{"n1", "n2"}, addrs: map[string]string{"n1": "n1:9", "n2": "n2:1"}, want: shardStep{}},
		{name: "a placed node without a replica joins as a non-voter", servers: []raft.Server{voter("n1"), voter("n2")},
			desired: []string{"n1", "n2", "n4"}, want: shardStep{kind: stepAddNonvoter, id: "n4", addr: "n4:1"}},
		{name: "not a node gossip says is dead", servers: []raft.Server{voter("n1"), voter("n2")},
			desired: []string{"n1", "n2", "n4"}, dead: []string{"n4"}, want: shardStep{}},
		{name: "a non-voter still catching up waits", servers: []raft.Server{voter("n1"), voter("n2"), nonvoter("n4")},
			desired: []string{"n1", "n2", "n4"}, want: shardStep{}},
		{name: "a caught-up non-voter is promoted", servers: []raft.Server{voter("n1"), voter("n2"), nonvoter("n4")},
			desired: []string{"n1", "n2", "n4"}, caughtUp: []string{"n4"}, want: shardStep{kind: stepPromote, id: "n4", addr: "n4:1"}},
		{name: "nothing leaves before every placed replica votes",
			servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
			desired: []string{"n1", "n2", "n4"}, want: shardStep{}},
		{name: "then a replica off the placement is removed",
			servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4")},
			desired: []string{"n1", "n2", "n4"}, want: shardStep{kind: stepRemove, id: "n3"}},
		{name: "a leader off the placement hands leadership away first",
			servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4")},
			desired: []string{"n2", "n3", "n4"}, want: shardStep{kind: stepLeave, id: "n1"}},
		{name: "of two off the placement, the dead one goes first",
			servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			desired: []string{"n1"}, dead: []string{"n3"}, want: shardStep{kind: stepRemove, id: "n3"}},
		{name: "a dead leaver goes before the leader hands leadership away",
			servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			desired: []string{"n2"}, dead: []string{"n3"}, want: shardStep{kind: stepRemove, id: "n3"}},
		{name: "a live voter stays while the voters left have no live majority",
			servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			desired: []string{"n1", "n3"}, dead: []string{"n3"}, want: shardStep{}},
		{name: "a live non-voter goes whatever the voters",
			servers: []raft.Server{voter("n1"), nonvoter("n2"), voter("n3")},
			desired: []string{"n1", "n3"}, dead: []string{"n3"}, want: shardStep{kind: stepRemove, id: "n2"}},
		{name: "leadership goes to the preferred leader once settled",
			servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			desired: []string{"n2", "n1", "n3"}, settled: true, want: shardStep{kind: stepPrefer, id: "n2"}},
		{name: "but not before", servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			desired: []string{"n2", "n1", "n3"}, want: shardStep{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := addrs
			if tc.addrs != nil {
				a = tc.addrs
			}
			asked := map[string]bool{}
			got := planShard(shardPlanInput{
				me: "n1", servers: tc.servers, desired: tc.desired, settled: tc.settled,
				raftAddr: func(id string) string { return a[id] },
				alive: func(id string) bool {
					for _, d := range tc.dead {
						if d == id {
							return false
						}
					}
					return true
				},
				caughtUp: func(id string) bool {
					asked[id] = true
					for _, c := range tc.caughtUp {
						if c == id {
							return true
						}
					}
					return false
				},
			})
			if got != tc.want {
				t.Errorf("planShard = %+v, want %+v", got, tc.want)
			}
			for id := range asked {
				for _, s := range tc.servers {
					if string(s.ID) == id && s.Suffrage == raft.Voter {
						t.Errorf("asked whether voter %s caught up: only non-voters cost that call", id)
					}
				}
			}
		})
	}
}
