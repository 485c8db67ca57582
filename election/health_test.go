package election

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// healthSwitch is a HealthCheck whose answer the test sets; it counts calls.
type healthSwitch struct {
	mu    sync.Mutex
	err   error
	block bool // wait for the context to end instead
	calls atomic.Int32
}

func (h *healthSwitch) set(err error, block bool) {
	h.mu.Lock()
	h.err, h.block = err, block
	h.mu.Unlock()
}

func (h *healthSwitch) check(ctx context.Context) error {
	h.calls.Add(1)
	h.mu.Lock()
	err, block := h.err, h.block
	h.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func followsOf(b *fakeBackend) int { b.mu.Lock(); defer b.mu.Unlock(); return b.follows }

func releasesOf(b *fakeBackend) ([]uint64, []time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]uint64(nil), b.released...), append([]time.Duration(nil), b.unserved...)
}

// A leader whose check fails stands down as soon as the failure is
// recorded, without waiting for its next renewal, releases the row at once
// (it served its lock delay: no delay handed on), sits out two retry
// intervals, does not campaign while the check fails (it runs every
// Health.Interval meanwhile), and campaigns as soon as it passes. It
// was elected at once: a candidate held down (just started) still takes a
// free row.
func TestUnhealthyLeaderHandsOverAndWaitsForHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := &healthSwitch{}
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		const every = 1500 * time.Millisecond // not a multiple of the renew interval
		h := newHarness(t, b, func(c *Config) { c.Health.Check, c.Health.Interval = hs.check, every })
		synctest.Wait() // the loop and the watchdog wait
		if !h.c.IsLeader() {
			t.Fatal("not leading")
		}
		wantStatus(t, h.c, true, false)
		b.set(func(f *fakeBackend) { f.followB = beat{} })
		hs.set(errors.New("disk full"), false)
		renewals := renewalsOf(b)
		advance(every) // the second check fails, before the renewal due at tRenew
		if !strings.Contains(h.ev.String(), "demoted:unhealthy") || h.c.IsLeader() {
			t.Fatalf("still leading once the check failed: %s", h.ev)
		}
		if got := renewalsOf(b); got != renewals {
			t.Errorf("%d renewals after the failed check, want none", got-renewals)
		}
		if r, u := releasesOf(b); len(r) != 1 || r[0] != 5 || u[0] != 0 {
			t.Fatalf("released %v with unserved %v, want term 5 released at once", r, u)
		}
		if got, want := h.ev.String(), "leader:me,elected,elected-returned,demoted:unhealthy"; got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
		wantStatus(t, h.c, false, false)
		// Sitting out, then not campaigning; checking every interval.
		follows, calls := followsOf(b), hs.calls.Load()
		advance(4 * every)
		if got := hs.calls.Load() - calls; got != 4 {
			t.Errorf("%d checks in 4 intervals, want 4", got)
		}
		if got := followsOf(b); got != follows {
			t.Fatalf("campaigned %d times while unhealthy", got-follows)
		}
		hs.set(nil, false)
		advance(every) // the check passes: the loop looks at once
		if got := followsOf(b); got != follows+1 {
			t.Fatalf("%d looks once the check passed, want 1 at once", got-follows)
		}
		wantStatus(t, h.c, true, false)
	})
}

// wantStatus checks the elector's health in c's Progress, as package
// electionhttp's StatusHandler serves it: healthy (reported, as there is a
// HealthCheck) and wedged.
func wantStatus(t *testing.T, c *Candidate, healthy, wedged bool) {
	t.Helper()
	if p := c.Progress(); !p.HealthCheck || p.Healthy != healthy || p.Wedged != wedged {
		t.Fatalf("progress health check %v healthy %v wedged %v, want true, %v and %v", p.HealthCheck, p.Healthy, p.Wedged, healthy, wedged)
	}
}

// A check runs beside the campaign: a leader renews on time while a check
// that does not answer runs, and the check fails at Health.Timeout,
// counted as a failure and a timeout; the leader then stands down.
func TestHealthCheckNeverDelaysRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := &healthSwitch{}
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		m := newRecMetrics()
		const timeout = 5 * time.Second // more than two renew intervals
		h := newHarness(t, b, func(c *Config) { c.Health.Check, c.Health.Timeout, c.Metrics = hs.check, timeout, m })
		synctest.Wait() // the loop and the watchdog wait
		hs.set(nil, true)
		renewals := renewalsOf(b)
		advance(tRenew) // the next check begins, and a renewal is due
		advance(timeout - time.Nanosecond)
		if got := renewalsOf(b) - renewals; got != 3 {
			t.Errorf("%d renewals while the check ran for %v, want 3", got, timeout)
		}
		if !h.c.IsLeader() || strings.Contains(h.ev.String(), "demoted") {
			t.Fatalf("stood down before the check's timeout: %s", h.ev)
		}
		advance(time.Nanosecond)
		if !strings.Contains(h.ev.String(), "demoted:unhealthy") {
			t.Fatalf("not unhealthy at the check's timeout: %s", h.ev)
		}
		if r, _ := releasesOf(b); len(r) != 1 {
			t.Fatalf("released %v, want the row released once", r)
		}
		if f, to := m.n("health:failed"), m.n("health:timeout"); f != 1 || to != 1 {
			t.Errorf("health check failures %d, timeouts %d, want 1 and 1", f, to)
		}
		if h.c.Progress().Wedged {
			t.Error("a check past its timeout reported as wedged")
		}
	})
}

// A candidate whose check failed within Health.HoldDown, or that
// started within it, does not ask for leadership by priority; it asks once
// the hold-down is over.
func TestPreferHeldDownAfterAFailedCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const holdDown = 3 * time.Second
		dbNow := time.Unix(1_800_000_000, 0).UTC()
		seen := Record{Election: "unit", ID: "other", Term: 7, Priority: 1, Since: dbNow.Add(-time.Hour),
			LastRenewal: dbNow.Add(-100 * time.Millisecond), Lease: time.Second, LeaseLeft: 900 * time.Millisecond}
		cfg, err := Config{Name: "unit", ID: "me", Health: HealthConfig{Check: func(context.Context) error { return nil }, HoldDown: holdDown}, Preference: PreferenceConfig{Priority: 2}}.settings()
		if err != nil {
			t.Fatal(err)
		}
		b := &fakeBackend{}
		c := newCandidate(cfg, b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := c.startHealth(ctx) // held down from now; the check passes
		defer stop()
		synctest.Wait()
		for _, step := range []struct {
			advance time.Duration
			term    uint64
			ask     bool
		}{
			{0, 7, false},                          // just started
			{holdDown - time.Nanosecond, 7, false}, // still held down
			{time.Nanosecond, 7, true},             // a record of passing for the hold-down
		} {
			time.Sleep(step.advance)
			seen.Term = step.term
			n := len(b.prefers)
			c.prefer(ctx, seen, time.Second)
			if asked := len(b.prefers) > n; asked != step.ask {
				t.Fatalf("%v after the start: asked %v, want %v", step.advance, asked, step.ask)
			}
		}
		c.recordHealth(errors.New("flap"), nil, 0)
		for _, step := range []struct {
			advance time.Duration
			ask     bool
		}{{0, false}, {holdDown - time.Nanosecond, false}, {time.Nanosecond, true}} {
			time.Sleep(step.advance)
			seen.Term++
			n := len(b.prefers)
			c.prefer(ctx, seen, time.Second)
			if asked := len(b.prefers) > n; asked != step.ask {
				t.Fatalf("%v after a failure: asked %v, want %v", step.advance, asked, step.ask)
			}
		}
	})
}

// A holder still waiting out its lock delay when the check fails was never
// elected: it releases with the rest of its delay handed on.
func TestUnhealthyHolderHandsOnItsLockDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := &healthSwitch{}
		b := &fakeBackend{followB: beat{held: true, term: 3, delay: tLease}}
		h := newHarness(t, b, func(c *Config) { c.Health.Check = hs.check })
		synctest.Wait()
		b.set(func(f *fakeBackend) { f.followB = beat{} })
		hs.set(errors.New("warming up"), false)
		advance(tRenew)
		waitFor(t, func() bool { r, _ := releasesOf(b); return len(r) == 1 })
		if _, u := releasesOf(b); u[0] != tLease-tRenew {
			t.Fatalf("unserved %v handed on, want %v", u[0], tLease-tRenew)
		}
		if got := h.ev.String(); got != "leader:me" {
			t.Fatalf("events %q, want no election", got)
		}
	})
}

// A follower whose check fails never campaigns.
func TestUnhealthyFollowerDoesNotCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := &healthSwitch{err: errors.New("no")}
		b := &fakeBackend{followB: beat{held: true, term: 3}}
		m := newRecMetrics()
		h := newHarness(t, b, func(c *Config) { c.Health.Check, c.Metrics = hs.check, m })
		waitFor(t, func() bool { return hs.calls.Load() >= 1 })
		for i := 0; i < 3; i++ {
			synctest.Wait()
			advance(tRenew) // the default Health.Interval
		}
		if n := followsOf(b); n != 0 || h.c.IsLeader() {
			t.Fatalf("an unhealthy follower looked %d times; leader %v", n, h.c.IsLeader())
		}
		if p := m.mustProgress(t, "unit"); p.Healthy {
			t.Error("progress healthy while the check fails")
		}
		wantStatus(t, h.c, false, false)
		if n := m.n("health:failed"); n < 3 {
			t.Errorf("health check failures %d, want at least 3", n)
		}
	})
}

// A callback that blocks wedges the campaign loop: reported by Progress
// (electionhttp's HealthzHandler answers 503, StatusHandler says wedged) and
// sqlelect_wedged once RenewDeadline past due, and no longer once the loop
// moves on. A candidate not running is reported so too.
func TestWedgedElectorReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, unblock := make(chan struct{}), make(chan struct{})
		var once sync.Once
		m := newRecMetrics()
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		h := newHarness(t, b, func(c *Config) {
			c.Metrics = m
			c.Callbacks.OnLeaderChanged = func(Record) { once.Do(func() { close(entered); <-unblock }) }
		})
		<-entered // the loop is held up from now on
		if p := h.c.Progress(); !p.Running || p.Wedged {
			t.Fatalf("progress running %v wedged %v before the wedge", p.Running, p.Wedged)
		}
		advance(tRenewDeadline) // overdue by exactly the renew deadline: not yet
		if p := h.c.Progress(); p.Wedged || p.Overdue > p.RenewDeadline {
			t.Fatalf("progress wedged %v overdue %v at the renew deadline", p.Wedged, p.Overdue)
		}
		advance(time.Millisecond)
		if p := h.c.Progress(); !p.Running || !p.Wedged || p.Overdue <= tRenewDeadline || p.RenewDeadline != tRenewDeadline {
			t.Fatalf("progress running %v wedged %v overdue %v renew deadline %v, want wedged past %v",
				p.Running, p.Wedged, p.Overdue, p.RenewDeadline, tRenewDeadline)
		}
		if !m.mustProgress(t, "unit").Wedged {
			t.Error("progress not wedged")
		}
		if h.c.Progress().HealthCheck {
			t.Fatal("progress reports a health check where there is none")
		}
		close(unblock)
		waitFor(t, func() bool { return !h.c.Progress().Wedged })
		if m.mustProgress(t, "unit").Wedged {
			t.Error("progress wedged after the loop moved on")
		}
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		if p := h.c.Progress(); p.Running || p.Wedged {
			t.Fatalf("progress running %v wedged %v after Run returned", p.Running, p.Wedged)
		}
	})
}

// TestHealthResultAge: a leader stands down at most Health.Timeout plus
// the longer of Health.Interval and Health.Timeout after the state
// its check reads turned bad (doc.go, "Health"): runs never overlap, so a
// run slower than the interval delays the next, and the interval plus the
// timeout holds only for runs faster than the interval. Each run reads the
// state as it starts and answers took later; the state turns bad just
// after the third run read it.
func TestHealthResultAge(t *testing.T) {
	const interval, timeout = 500 * time.Millisecond, time.Second
	for _, tc := range []struct {
		name       string
		took, want time.Duration
	}{
		{"runs faster than the interval", 300 * time.Millisecond, interval + 300*time.Millisecond},
		{"runs slower than the interval", 900 * time.Millisecond, 2 * 900 * time.Millisecond},
		{"runs as slow as the timeout", timeout - time.Nanosecond, 2 * (timeout - time.Nanosecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var bad atomic.Bool
				var runs atomic.Int32
				var turned, stood atomic.Pointer[time.Time]
				check := func(ctx context.Context) error {
					was := bad.Load()
					if runs.Add(1) == 3 {
						now := time.Now()
						turned.Store(&now)
						bad.Store(true)
					}
					select {
					case <-time.After(tc.took):
					case <-ctx.Done():
						return ctx.Err()
					}
					if was {
						return errors.New("bad")
					}
					return nil
				}
				b := &fakeBackend{followB: beat{held: true, term: 5}}
				newHarness(t, b, func(c *Config) {
					c.Health.Check, c.Health.Interval, c.Health.Timeout = check, interval, timeout
					c.Callbacks.OnDemoted = func(Demotion) { now := time.Now(); stood.Store(&now) }
				})
				advance(5 * time.Second)
				if turned.Load() == nil || stood.Load() == nil {
					t.Fatal("the state never turned bad, or the leader never stood down")
				}
				age := stood.Load().Sub(*turned.Load())
				if bound := timeout + max(interval, timeout); age != tc.want || age > bound {
					t.Errorf("stood down %v after the state turned bad, want %v (at most %v)", age, tc.want, bound)
				}
			})
		})
	}
}
