package electiontest

import (
	"sync"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// FreezableClock is an election.Clock that follows real time until Freeze,
// then stands still, with no timer firing, until Thaw: from the database's
// view the candidate using it is a process frozen by SIGSTOP, and at Thaw it
// resumes as after SIGCONT, its clock jumping to real time. Safe for
// concurrent use.
type FreezableClock struct {
	mu       sync.Mutex
	frozen   bool
	frozenAt time.Time
	thawed   chan struct{}
}

// NewFreezableClock returns a running clock.
func NewFreezableClock() *FreezableClock { return &FreezableClock{thawed: make(chan struct{})} }

// Freeze stops the clock and its timers.
func (c *FreezableClock) Freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.frozen {
		c.frozen, c.frozenAt, c.thawed = true, time.Now(), make(chan struct{})
	}
}

// Thaw resumes the clock at real time; timers due meanwhile fire.
func (c *FreezableClock) Thaw() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		c.frozen = false
		close(c.thawed)
	}
}

// Now implements election.Clock.
func (c *FreezableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return c.frozenAt
	}
	return time.Now()
}

// gate returns a channel closed when the clock is not frozen.
func (c *FreezableClock) gate() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return c.thawed
	}
	done := make(chan struct{})
	close(done)
	return done
}

// NewTimer implements election.Clock.
func (c *FreezableClock) NewTimer(d time.Duration) election.Timer {
	t := &freezableTimer{rt: time.NewTimer(d), ch: make(chan time.Time, 1), stop: make(chan struct{})}
	go func() {
		select {
		case <-t.rt.C:
		case <-t.stop:
			return
		}
		select {
		case <-c.gate():
		case <-t.stop:
			return
		}
		t.ch <- c.Now()
	}()
	return t
}

type freezableTimer struct {
	rt   *time.Timer
	ch   chan time.Time
	once sync.Once
	stop chan struct{}
}

func (t *freezableTimer) C() <-chan time.Time { return t.ch }

func (t *freezableTimer) Stop() bool {
	active := t.rt.Stop()
	t.once.Do(func() { close(t.stop) })
	return active
}

func (c *FreezableClock) isFrozen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen
}
