package cluster_test

import (
	"testing"
	"time"
)

func TestThreeNodesSettle(t *testing.T) {
	nodes := cluster3(t)
	waitSettled(t, nodes, 10*time.Second)
}
