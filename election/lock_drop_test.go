package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// TestLockHoldEndedPastDeadlineLetsLockGo: a lock-backend leader whose hold
// ends past its renew deadline (its OnElected ignores the cancelled context
// for longer than that, while it stands down for a Resign, a failed health
// check or a Transfer) can no longer release the row, but it lets the lock
// go: while it sits out, a waiting candidate gets the lock, waits out what
// is left of the lease (at most its lock delay) and leads. Were the lock
// kept, the candidate that stood down would take its own row back after
// its sit-out, and the waiting one would never lead.
func TestLockHoldEndedPastDeadlineLetsLockGo(t *testing.T) {
	t.Parallel() // waits on leases, on a database and an election of its own
	for _, tc := range []struct {
		name   string
		reason election.Reason
		// stand makes a, the leader, stand down; sick makes its next health
		// check fail.
		stand func(ctx context.Context, a *lockCand, sick *atomic.Bool) error
	}{
		{"resign", election.ReasonResigned, func(ctx context.Context, a *lockCand, _ *atomic.Bool) error {
			return a.e.Resign(ctx)
		}},
		{"unhealthy", election.ReasonUnhealthy, func(_ context.Context, _ *lockCand, sick *atomic.Bool) error {
			sick.Store(true)
			return nil
		}},
		{"transfer", election.ReasonTransferred, func(ctx context.Context, a *lockCand, _ *atomic.Bool) error {
			return a.e.Transfer(ctx, "b")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLockEnv(t, 60*time.Second)
			// A lease (and so the lock connection's wait_timeout) well
			// beyond the sit-out: the server does not drop an idle
			// connection, and its lock, meanwhile.
			const lease, lockDelay, retry = 3 * time.Second, time.Second, 250 * time.Millisecond
			timing := func(c *election.Config) {
				c.LeaseDuration, c.Tuning.LockDelay, c.Tuning.RetryInterval = lease, lockDelay, retry
			}
			var sick, slow atomic.Bool
			demoted := make(chan election.Demotion, 4)
			a := e.start("a", func(c *election.Config) {
				timing(c)
				inner := c.Callbacks
				c.Callbacks.OnElected = func(ctx context.Context, l election.Leadership) {
					inner.OnElected(ctx, l)
					if slow.CompareAndSwap(true, false) {
						time.Sleep(tRenewDeadline + 300*time.Millisecond) // past the hold's deadline
					}
				}
				c.Callbacks.OnDemoted = func(d election.Demotion) {
					inner.OnDemoted(d)
					demoted <- d
				}
				c.Health.Check = func(context.Context) error {
					if sick.CompareAndSwap(true, false) {
						return errors.New("sick once")
					}
					return nil
				}
			})
			if l, _ := e.waitLeader(lockDelay+5*time.Second, nil); l != a {
				t.Fatalf("%s leads, want a", l.id)
			}
			following := make(chan struct{})
			var once atomic.Bool
			e.start("b", func(c *election.Config) {
				timing(c)
				c.Callbacks.OnLeaderChanged = func(r election.Record) {
					if r.ID == "a" && once.CompareAndSwap(false, true) {
						close(following)
					}
				}
			})
			select {
			case <-following:
			case <-e.ctx.Done():
				t.Fatal("b never saw a lead")
			}
			aConn := e.status().ConnectionID
			if owner := e.lockOwner(); owner != aConn {
				t.Fatalf("the lock is held by connection %d, the row names a's %d", owner, aConn)
			}

			slow.Store(true)
			ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
			defer cancel()
			if err := tc.stand(ctx, a, &sick); err != nil {
				t.Fatal(err)
			}
			var d election.Demotion
			select {
			case d = <-demoted:
			case <-ctx.Done():
				t.Fatal("a never stood down")
			}
			if d.Reason != tc.reason {
				t.Errorf("a demoted with reason %q, want %q", d.Reason, tc.reason)
			}
			// a lets the lock go right after OnDemoted (one statement; the
			// bound leaves room for a loaded machine), and sits out two
			// retry intervals (more after a transfer): b, blocked in
			// GET_LOCK, gets the lock meanwhile.
			const within = time.Second
			deadline := time.Now().Add(within)
			for e.lockOwner() == aConn {
				if time.Now().After(deadline) {
					t.Errorf("a's connection %d still holds the lock %v after it stood down past its deadline", aConn, within)
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			nl, at := e.waitLeader(lease+5*time.Second, a)
			if nl.id != "b" {
				t.Fatalf("%s leads, want b", nl.id)
			}
			e.rec.mu.Lock()
			var aLed int
			for _, iv := range e.rec.ivs {
				if iv.id == "a" {
					aLed++
				}
			}
			e.rec.mu.Unlock()
			if aLed != 1 {
				t.Errorf("a led %d times, want once: it took its row back", aLed)
			}
			t.Logf("b leads %v after a's demotion (%s, until %s)", at.Sub(d.Until).Round(time.Millisecond), d.Reason, d.Until.Format("15:04:05.000"))
		})
	}
}
