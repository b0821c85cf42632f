package client

import (
	"context"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A node whose status lists no nodes (a broken or garbage answer) is not
// taken for the cluster's view: installed, it left the client no node to
// send a check to, and the next check whose leader was unknown panicked
// (an integer divide by zero picking a node round-robin). The client now
// keeps the routes it had, or, with none, fails New as when no node
// answers.
func TestStatusListingNoNodesIsNotInstalled(t *testing.T) {
	empty := &statusNode{} // answers a shard, led by a node it does not list
	addr := serveAdmin(t, empty)
	if c, err := New(context.Background(), Options{Addrs: []string{addr}, RefreshInterval: time.Hour}); err == nil {
		defer c.Close()
		_, err := c.Allow(context.Background(), &pb.AllowRequest{Key: "k", Limit: batchLimit})
		t.Errorf("New took a view without nodes; a check then got %v", err)
	}
	// A client that had a view keeps it.
	good := &statusNode{}
	goodAddr := serveAdmin(t, good)
	good.nodes = []string{goodAddr}
	c, err := New(context.Background(), Options{Addrs: []string{goodAddr}, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good.nodes = nil
	if err := c.loadRoutes(context.Background()); err == nil {
		t.Error("a refresh took a view without nodes")
	}
	if got := c.anyAddr(); got != goodAddr {
		t.Errorf("a check goes to %q, want %q", got, goodAddr)
	}
}
