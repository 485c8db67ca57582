package election

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when told. Safe for concurrent use.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever a timer is added
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	ch   chan time.Time
	done bool
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{c: f, at: f.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.done = true
		t.ch <- f.now
		return t
	}
	f.timers = append(f.timers, t)
	close(f.changed)
	f.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock by d and fires the timers that are due.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	live := f.timers[:0]
	for _, t := range f.timers {
		switch {
		case t.done:
		case !t.at.After(f.now):
			t.done = true
			t.ch <- f.now
		default:
			live = append(live, t)
		}
	}
	f.timers = live
}

// waiters returns the number of pending timers.
func (f *fakeClock) waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, t := range f.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// WaitTimers blocks until at least n timers are pending, or fails the test
// after a real-time bound.
func (f *fakeClock) WaitTimers(t *testing.T, n int) {
	t.Helper()
	bound := time.After(5 * time.Second)
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if f.waiters() >= n {
			return
		}
		select {
		case <-ch:
		case <-bound:
			t.Fatalf("fake clock: %d timers pending, want %d", f.waiters(), n)
		}
	}
}

func TestFakeClockFiresDueTimers(t *testing.T) {
	c := newFakeClock()
	a, b := c.NewTimer(time.Second), c.NewTimer(3*time.Second)
	c.Advance(2 * time.Second)
	select {
	case <-a.C():
	default:
		t.Fatal("timer a did not fire")
	}
	select {
	case <-b.C():
		t.Fatal("timer b fired early")
	default:
	}
	if !b.Stop() || b.Stop() {
		t.Fatal("Stop should report active once")
	}
}
