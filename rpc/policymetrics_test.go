package rpc

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

// fakeMeta is a meta state whose policies a test changes.
type fakeMeta struct {
	mu      sync.Mutex
	view    *fsm.MetaView
	changed chan struct{}
}

func (m *fakeMeta) View() *fsm.MetaView {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view
}

func (m *fakeMeta) MetaChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// set makes names the policies and signals the change.
func (m *fakeMeta) set(names ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := &fsm.MetaView{Policies: map[string]*policy.Policy{}}
	for _, n := range names {
		v.Policies[n] = &policy.Policy{Name: n}
	}
	m.view = v
	close(m.changed)
	m.changed = make(chan struct{})
}

// Each pass asks about the policies of the view current then: at start,
// and forgetPause after a change; the changes of a burst are one pass, on
// the last view. It stops with its context.
func TestForgetDeletedPoliciesFollowsTheMetaState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeMeta{changed: make(chan struct{})}
		m.set("a", "b")
		var passes [][]string
		forget := func(has func(string, string) bool) {
			var kept []string
			for _, n := range []string{"a", "b", "c"} {
				if has(n, "") {
					kept = append(kept, n)
				}
			}
			passes = append(passes, kept)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			ForgetDeletedPolicies(ctx, m, forget)
			close(done)
		}()
		synctest.Wait()
		m.set("a") // b deleted
		time.Sleep(forgetPause)
		synctest.Wait()
		m.set("a", "c") // a burst: one pass, on its last view
		m.set("c")
		time.Sleep(forgetPause)
		synctest.Wait()
		time.Sleep(time.Hour) // no change: no pass
		want := [][]string{{"a", "b"}, {"a"}, {"c"}}
		if !slices.EqualFunc(passes, want, slices.Equal[[]string]) {
			t.Errorf("passes %v, want %v", passes, want)
		}
		cancel()
		<-done
	})
}
