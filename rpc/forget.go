package rpc

import (
	"time"

	"google.golang.org/grpc/connectivity"
)

// Departed peers. A node keeps a connection (Peers) and a forward queue
// (forwarder) per peer address it has called. Nodes leave and are
// replaced, and where they are known by IP a replacement comes with a new
// address: without forgetting, each departed address kept its queue's
// goroutine and a connection that redials it every deadconn.MaxRedialDelay, for as
// long as the process ran (seen in a soak: a queue and a connection of
// each node that had left, 14 minutes after it left). Both are forgotten
// once unused for forgetAfter; a later call makes them anew.

const (
	// forgetAfter is how long a peer's connection or forward queue may go
	// unused before it is forgotten: far longer than any call (a live
	// member's connection is used every few seconds by the clock reads).
	forgetAfter = 10 * time.Minute
	// forgetEvery is how often unused ones are looked for.
	forgetEvery = time.Minute
)

// sweepEvery calls sweep with the time every interval until stop closes.
func sweepEvery(stop <-chan struct{}, every time.Duration, sweep func(now time.Time)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			sweep(now)
		}
	}
}

// forgetIdle closes the connections unused since forgetAfter before now,
// unless ready: a call may still be running on a ready connection (a long
// backup export), while a departed peer's connection is never ready. An
// idle live one is left to gRPC, which idles it itself.
func (p *Peers) forgetIdle(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.conns {
		if now.Sub(p.used[addr]) < forgetAfter || c.GetState() == connectivity.Ready {
			continue
		}
		c.Close()
		delete(p.conns, addr)
		delete(p.used, addr)
	}
}

// forgetIdle stops and drops the forward queues unused since forgetAfter
// before now that have nothing waiting and no call in flight.
func (f *forwarder) forgetIdle(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, q := range f.queues {
		if now.Sub(q.used) < forgetAfter || q.waiting.Load() > 0 || len(q.slots) > 0 {
			continue
		}
		delete(f.queues, addr)
		close(q.retire)
	}
}
