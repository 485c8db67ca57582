package election

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqlelect/sqlelect/internal/stmt"
)

// fakeBackend models the campaign's view of the database for the timing
// logic: what follow and renew return is set by the test. It is not a model
// of MySQL; the behaviour that depends on MySQL is tested in integration/.
type fakeBackend struct {
	mu        sync.Mutex
	followB   beat
	renewB    func(hold uint64) (beat, error)
	stall     chan struct{} // when non-nil, renew blocks until it is closed
	released  []uint64
	unserved  []time.Duration      // the unserved delay of each release
	inFlight  chan context.Context // when non-nil, renew sends its context here
	finish    chan struct{}        // and then returns held when this is closed
	follows   int
	renewals  int
	preErr    error
	preTakes  time.Duration // how long preflight takes, unless its ctx ends first
	followErr error         // when non-nil, follow fails with it
	handed    []string      // the target of each hand-over
	window    time.Duration
	value     string // the value set by proclaim
	proclaims []uint64
	prefers   []uint64 // the terms prefer asked to hand over
	giveUpErr error    // when non-nil, a release or a hand-over fails with it
	backendBase
}

func (f *fakeBackend) preflightErr() error { f.mu.Lock(); defer f.mu.Unlock(); return f.preErr }

func (f *fakeBackend) preflight(ctx context.Context) (stmt.Bound, error) {
	f.mu.Lock()
	takes := f.preTakes
	f.mu.Unlock()
	if takes > 0 {
		select {
		case <-time.After(takes):
		case <-ctx.Done():
			return stmt.Bound{}, ctx.Err()
		}
	}
	return stmt.Bound{}, f.preflightErr()
}

func (f *fakeBackend) follow(context.Context, bool) (Record, beat, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.follows++
	if f.followErr != nil {
		return Record{}, beat{}, 0, f.followErr
	}
	return Record{}, f.followB, time.Second, nil
}

func (f *fakeBackend) renew(ctx context.Context, hold uint64) (beat, error) {
	f.mu.Lock()
	stall, fn, inFlight, finish := f.stall, f.renewB, f.inFlight, f.finish
	f.renewals++
	f.mu.Unlock()
	if inFlight != nil {
		inFlight <- ctx
		select {
		case <-finish:
			return beat{held: true, term: hold}, nil
		case <-ctx.Done():
			return beat{}, ctx.Err()
		}
	}
	if stall != nil {
		<-stall
		return beat{}, errors.New("stalled")
	}
	if fn == nil {
		return beat{held: true, term: hold}, nil
	}
	return fn(hold)
}

func (f *fakeBackend) writeRow(_ context.Context, w rowWrite, p stmt.Params) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case w == writeProclaim:
		f.value = p.Value
		f.proclaims = append(f.proclaims, p.Hold)
	case w == writePrefer:
		f.prefers = append(f.prefers, p.Term)
	case f.giveUpErr != nil:
		return false, f.giveUpErr
	case w == writeHandOver:
		f.handed = append(f.handed, p.To)
		f.window = time.Duration(p.Lease) * time.Millisecond
	default:
		f.released = append(f.released, p.Hold)
		var unserved time.Duration
		if w == writeHandOff {
			unserved = time.Duration(p.Lease) * time.Millisecond
		}
		f.unserved = append(f.unserved, unserved)
	}
	return true, nil
}

func (f *fakeBackend) lost(context.Context, bool) error { return nil }

func (f *fakeBackend) close() {}

func (f *fakeBackend) set(fn func(f *fakeBackend)) { f.mu.Lock(); fn(f); f.mu.Unlock() }

// events records callbacks in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) { e.mu.Lock(); e.log = append(e.log, s); e.mu.Unlock() }
func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.log, ",")
}

// harness runs a candidate on the fake backend. It must be made inside a
// synctest bubble (synctest.Test): the candidate's clock is the real one,
// which the bubble fakes, so that time moves only when every goroutine of
// the bubble waits, and by exactly as much as the test says (see advance).
// synctest.Test also waits for every goroutine of the bubble to exit (and
// fails the test on a deadlock): the goroutine-leak check.
type harness struct {
	t      *testing.T
	b      *fakeBackend
	c      *Candidate
	ev     *events
	cancel context.CancelFunc
	done   chan error
}

const (
	tLease         = 10 * time.Second
	tRenewDeadline = 6 * time.Second
	tRenew         = 2 * time.Second
	tRetry         = 1 * time.Second
)

func newHarness(t *testing.T, b *fakeBackend, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, b: b, ev: &events{}, done: make(chan error, 1)}
	cfg := Config{Name: "unit", ID: "me", LeaseDuration: tLease, Tuning: TuningConfig{RenewDeadline: tRenewDeadline, RenewInterval: tRenew, RetryInterval: tRetry, JitterFactor: -1},
		Callbacks: Callbacks{
			OnElected: func(ctx context.Context, l Leadership) {
				h.ev.add("elected")
				<-ctx.Done()
				h.ev.add("elected-returned")
			},
			OnDemoted:       func(d Demotion) { h.ev.add("demoted:" + string(d.Reason)) },
			OnLeaderChanged: func(r Record) { h.ev.add("leader:" + r.ID) },
		}}
	if mod != nil {
		mod(&cfg)
	}
	s, err := cfg.settings()
	if err != nil {
		t.Fatal(err)
	}
	b.backendBase = backendBase{cfg: s, value: s.Value}
	h.c = newCandidate(s, b)
	// The bubble's time: an hour of it passes in no time, when the test
	// waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	h.cancel = cancel
	go func() { h.done <- h.c.Run(ctx) }()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop cancels Run and waits for it.
func (h *harness) stop() error {
	h.cancel()
	select {
	case err, ok := <-h.done:
		if ok {
			close(h.done)
		}
		return err
	case <-time.After(5 * time.Second):
		h.t.Fatal("Run did not return")
		return nil
	}
}

// advanceUntilLeader advances the clock a second at a time until the
// candidate leads, and returns how far it advanced; it fails the test past
// limit.
func (h *harness) advanceUntilLeader(limit time.Duration) time.Duration {
	h.t.Helper()
	var elapsed time.Duration
	for !h.c.IsLeader() {
		if elapsed > limit {
			h.t.Fatal("never elected")
		}
		advance(time.Second)
		elapsed += time.Second
	}
	return elapsed
}

// advance lets d pass on the bubble's clock, and returns once every
// goroutine of the bubble waits again: what was due by then has run.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func TestLeaderStandsDownByItsClockWhenRenewalsStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 7}}
		h := newHarness(t, b, nil)
		synctest.Wait() // the loop and the watchdog wait
		if !h.c.IsLeader() || h.c.Term() != 7 {
			t.Fatalf("want leader of term 7, got %v %d", h.c.IsLeader(), h.c.Term())
		}
		stall := make(chan struct{})
		b.set(func(f *fakeBackend) { f.stall, f.followB = stall, beat{} })
		advance(tRenew) // the loop now blocks in renew
		// The deadline passes while the loop is stuck in renew: IsLeader
		// turns false by the clock, at the deadline to the nanosecond.
		advance(tRenewDeadline - tRenew - time.Nanosecond)
		if !h.c.IsLeader() {
			t.Fatal("stood down early")
		}
		advance(time.Nanosecond)
		if h.c.IsLeader() || h.c.Term() != 0 {
			t.Fatal("IsLeader still true at the deadline")
		}
		// The watchdog cancels the leadership context while renew is stuck.
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "elected-returned") })
		close(stall)
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "demoted:lease_lost") })
		if got, want := h.ev.String(), "leader:me,elected,elected-returned,demoted:lease_lost"; !strings.HasPrefix(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}

func TestLockDelayBeforeLeading(t *testing.T) {
	tests := []struct {
		name      string
		delay     time.Duration
		disable   bool
		wantDelay time.Duration
	}{
		{"new row waits the lock delay", tLease, false, tLease},
		{"won expired row leads at once", 0, false, 0},
		{"lock delay disabled", tLease, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &fakeBackend{followB: beat{held: true, term: 3, delay: tc.delay}}
				h := newHarness(t, b, func(c *Config) { c.Tuning.DisableLockDelay = tc.disable })
				synctest.Wait()
				elapsed := h.advanceUntilLeader(2 * tLease)
				if tc.wantDelay == 0 && elapsed != 0 {
					t.Fatalf("elected after %v, want at once", elapsed)
				}
				if tc.wantDelay > 0 && elapsed < tc.wantDelay {
					t.Fatalf("elected after %v, before the lock delay %v", elapsed, tc.wantDelay)
				}
			})
		})
	}
}

func TestDeposedStandsDownAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		h := newHarness(t, b, nil)
		synctest.Wait()
		b.set(func(f *fakeBackend) {
			f.followB = beat{}
			f.renewB = func(uint64) (beat, error) { return beat{}, nil }
		})
		advance(tRenew)
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "demoted:deposed") })
		if h.c.IsLeader() {
			t.Fatal("still leader after deposition")
		}
	})
}

func TestRowDeletedWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		h := newHarness(t, b, nil)
		synctest.Wait()
		b.set(func(f *fakeBackend) {
			f.followB = beat{}
			f.renewB = func(uint64) (beat, error) { return beat{held: true, term: 9, inserted: true}, nil }
		})
		advance(tRenew)
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "demoted:deposed") })
		waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.released) == 1 && b.released[0] == 9 })
	})
}

func TestResignReleasesAndSitsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		h := newHarness(t, b, nil)
		synctest.Wait()
		b.set(func(f *fakeBackend) { f.followB = beat{} })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.c.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if h.c.IsLeader() {
			t.Fatal("leader after Resign")
		}
		b.mu.Lock()
		released, follows := append([]uint64(nil), b.released...), b.follows
		b.mu.Unlock()
		if len(released) != 1 || released[0] != 5 {
			t.Fatalf("released %v, want [5]", released)
		}
		synctest.Wait()
		advance(2*tRetry - time.Millisecond) // a wrongly woken loop has followed by now
		b.mu.Lock()
		if b.follows != follows {
			t.Errorf("campaigned while sitting out")
		}
		b.mu.Unlock()
		if got, want := h.ev.String(), "leader:me,elected,elected-returned,demoted:resigned"; got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}

func TestShutdownResignsAndReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		h := newHarness(t, b, nil)
		synctest.Wait()
		if err := h.stop(); err != nil {
			t.Fatalf("Run returned %v", err)
		}
		if got, want := h.ev.String(), "leader:me,elected,elected-returned,demoted:resigned"; got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
		if len(b.released) != 1 {
			t.Fatalf("released %v", b.released)
		}
	})
}

// A renewal in flight when Run's context ends finishes before the release:
// cancelling it could drop the lock backend's connection (and lock) before
// the row is marked released.
func TestShutdownLetsRenewalInFlightFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inFlight, finish := make(chan context.Context, 1), make(chan struct{})
		b := &fakeBackend{followB: beat{held: true, term: 5}, inFlight: inFlight, finish: finish}
		h := newHarness(t, b, nil)
		synctest.Wait()
		advance(tRenew)
		var rctx context.Context
		select {
		case rctx = <-inFlight:
		case <-time.After(5 * time.Second):
			t.Fatal("no renewal")
		}
		h.cancel() // cancels every context derived from Run's before returning
		if rctx.Err() != nil {
			t.Fatal("shutdown cancelled the renewal in flight")
		}
		b.set(func(f *fakeBackend) { f.released = nil })
		close(finish)
		if err := h.stop(); err != nil {
			t.Fatalf("Run returned %v", err)
		}
		b.set(func(f *fakeBackend) {
			if len(f.released) != 1 || f.released[0] != 5 {
				t.Errorf("released %v, want [5]", f.released)
			}
		})
	})
}

// A renewal sent before the deadline that succeeds after it must not revive
// the leadership the watchdog ended (a zombie: IsLeader true, the elected
// context cancelled, no OnDemoted): that leadership is demoted and a new
// one begins, with OnElected again.
func TestRenewalLandingAfterTheDeadlineStartsANewLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inFlight, finish := make(chan struct{}, 1), make(chan struct{})
		b := &fakeBackend{followB: beat{held: true, term: 7}}
		ls := make(chan Leadership, 2)
		h := newHarness(t, b, func(c *Config) {
			inner := c.Callbacks.OnElected
			c.Callbacks.OnElected = func(ctx context.Context, l Leadership) { ls <- l; inner(ctx, l) }
		})
		synctest.Wait()
		// The renewal's reply comes back late: its statement's timeout,
		// which ends at the deadline too, does not stop a reply already on
		// its way, so this renewal does not heed its context.
		b.set(func(f *fakeBackend) {
			f.followB = beat{}
			f.renewB = func(hold uint64) (beat, error) {
				select {
				case inFlight <- struct{}{}:
				default:
				}
				<-finish
				return beat{held: true, term: hold}, nil
			}
		})
		advance(tRenew)
		select {
		case <-inFlight:
		case <-time.After(5 * time.Second):
			t.Fatal("no renewal")
		}
		advance(tRenewDeadline - tRenew) // the deadline passes while the renewal is in flight
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "elected-returned") })
		if h.c.IsLeader() {
			t.Fatal("leader past the deadline")
		}
		close(finish) // the renewal succeeds, late
		const want = "leader:me,elected,elected-returned,demoted:lease_lost,elected"
		waitFor(t, func() bool { return strings.HasPrefix(h.ev.String(), want) })
		if !h.c.IsLeader() || h.c.Term() != 7 {
			t.Fatalf("after the new election: IsLeader %v, term %d", h.c.IsLeader(), h.c.Term())
		}
		// The first leadership's Fenced fails, though the same term leads
		// again (before any statement: the harness has no database).
		first, second := <-ls, <-ls
		called := false
		err := first.Fenced(context.Background(), func(*sql.Tx) error { called = true; return nil })
		if !errors.Is(err, ErrNotLeader) || called || first.Term != 7 || second.Term != 7 {
			t.Fatalf("Fenced of the ended leadership of term %d: %v (fn called: %v); new term %d", first.Term, err, called, second.Term)
		}
	})
}

// A hold that never led gives the row up with the rest of its lock delay
// (so that the next holder cannot lead before it would have), whether it
// resigns or finds its row deleted; a hold that led hands on nothing.
func TestReleaseHandsOnTheUnservedLockDelay(t *testing.T) {
	deleted := func(f *fakeBackend) {
		f.renewB = func(uint64) (beat, error) { return beat{held: true, term: 9, inserted: true}, nil }
	}
	tests := []struct {
		name   string
		delay  time.Duration
		renew  func(f *fakeBackend) // how the renewal at tRenew goes; nil: renewed
		resign bool                 // resign after that renewal
		term   uint64
		want   time.Duration
	}{
		{"resign while waiting", tLease, nil, true, 3, tLease - tRenew},
		{"row deleted while waiting", tLease, deleted, false, 9, tLease - tRenew},
		{"resign after leading", 0, nil, true, 3, 0},
		{"row deleted after leading", 0, deleted, false, 9, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &fakeBackend{followB: beat{held: true, term: 3, delay: tc.delay}}
				h := newHarness(t, b, nil)
				synctest.Wait()
				b.set(func(f *fakeBackend) {
					f.followB = beat{}
					if tc.renew != nil {
						tc.renew(f)
					}
				})
				advance(tRenew)
				if tc.resign {
					resignNow(h)
				}
				waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.released) == 1 })
				b.mu.Lock()
				defer b.mu.Unlock()
				if b.released[0] != tc.term || b.unserved[0] != tc.want {
					t.Fatalf("released term %d with %v unserved, want term %d with %v", b.released[0], b.unserved[0], tc.term, tc.want)
				}
			})
		})
	}
}

func resignNow(h *harness) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.c.Resign(ctx); err != nil {
		h.t.Error(err)
	}
}

// A candidate that loses a hold before its lock delay ended and gets the
// row again (even with no delay of its own) still waits out the first
// delay: whoever it waited for may still lead.
func TestLockDelayOutlivesTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 3, delay: tLease}}
		h := newHarness(t, b, nil)
		synctest.Wait()
		b.set(func(f *fakeBackend) {
			f.renewB = func(uint64) (beat, error) { return beat{}, nil } // deposed
			f.followB = beat{held: true, term: 4}                        // and back, with no delay
		})
		elapsed := h.advanceUntilLeader(2 * tLease)
		if elapsed < tLease {
			t.Fatalf("led %v after the first hold began, before its lock delay %v ended", elapsed, tLease)
		}
		if term := h.c.Term(); term != 4 {
			t.Fatalf("term %d, want 4", term)
		}
	})
}

// TestSlowPreflightPasses: a preflight whose statements together take
// longer than QueryTimeout (each within it: a loaded or distant server)
// passes once an attempt's bound has doubled, and the candidate leads;
// with each attempt bounded by QueryTimeout it never would.
func TestSlowPreflightPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const queryTimeout = 2 * time.Second
		h := newHarness(t, &fakeBackend{preTakes: 3 * queryTimeout, followB: beat{held: true, term: 1}},
			func(c *Config) { c.Tuning.QueryTimeout = queryTimeout })
		// Attempts bounded by 2, 4 and 8 s, a retry interval apart:
		// the third passes, 6 s into it.
		took := h.advanceUntilLeader(30 * time.Second)
		if want := queryTimeout + 2*queryTimeout + 2*tRetry + 3*queryTimeout; took < want {
			t.Errorf("led %v after the start, want no sooner than %v", took, want)
		}
	})
}

func TestRunStopsOnPermanentError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{preErr: ErrTableMissing}
		h := newHarness(t, b, nil)
		select {
		case err := <-h.done:
			if !errors.Is(err, ErrTableMissing) {
				t.Fatalf("Run returned %v", err)
			}
			close(h.done)
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return")
		}
	})
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{}
		h := newHarness(t, b, nil)
		synctest.Wait()
		if err := h.c.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
			t.Fatalf("second Run: %v", err)
		}
	})
}

// waitFor fails the test unless cond holds once every goroutine of the
// bubble waits.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatal("condition not met")
	}
}
