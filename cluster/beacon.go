package cluster

import "sync"

// beacon wakes everyone waiting for the next occurrence of an event. Its
// zero value is ready; a fire with nobody waiting costs no allocation.
type beacon struct {
	mu sync.Mutex
	ch chan struct{} // nil until someone waits
}

// wait returns a channel closed at the next fire.
func (b *beacon) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// fire wakes every waiter.
func (b *beacon) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
