package electionfake_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionfake"
)

// Every test runs in a synctest bubble: the fake's goroutines (Run, the
// callbacks) must all have returned when the test ends, or synctest.Test
// fails it, which replaces polling runtime.NumGoroutine for leaks; a
// context's deadline runs on the bubble's fake clock.

// start runs a fake with callbacks that log what they see, and stops it
// (checking Run returned nil) in t.Cleanup.
func start(t *testing.T, cfg election.Config) (*electionfake.Fake, *log, context.Context) {
	t.Helper()
	l := &log{}
	if cfg.Name == "" {
		cfg.Name = "e-test"
	}
	cfg.Callbacks = l.callbacks()
	f, err := electionfake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(tcancel)
	return f, l, tctx
}

type log struct {
	mu  sync.Mutex
	evs []string
}

func (l *log) add(s string) { l.mu.Lock(); l.evs = append(l.evs, s); l.mu.Unlock() }
func (l *log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.evs, " ")
}

func (l *log) callbacks() election.Callbacks {
	return election.Callbacks{
		OnElected: func(ctx context.Context, _ election.Leadership) {
			<-ctx.Done()
			l.add("elected+returned")
		},
		OnDemoted:       func(d election.Demotion) { l.add("demoted:" + string(d.Reason)) },
		OnLeaderChanged: func(r election.Record) { l.add("leader:" + r.ID) },
	}
}

func TestDriving(t *testing.T) {
	tests := []struct {
		name  string
		drive func(ctx context.Context, f *electionfake.Fake) error
		want  string
	}{
		{"elect then resign", func(ctx context.Context, f *electionfake.Fake) error {
			if _, err := f.Elect(ctx); err != nil {
				return err
			}
			return f.Resign(ctx)
		}, "leader:me elected+returned demoted:resigned leader:"},
		{"elect twice is one leadership", func(ctx context.Context, f *electionfake.Fake) error {
			a, _ := f.Elect(ctx)
			b, err := f.Elect(ctx)
			if a != b {
				return errors.New("a second Elect changed the term")
			}
			return err
		}, "leader:me"},
		{"taken over", func(ctx context.Context, f *electionfake.Fake) error {
			if _, err := f.Elect(ctx); err != nil {
				return err
			}
			_, err := f.SetLeader(ctx, "other")
			return err
		}, "leader:me elected+returned demoted:deposed leader:other"},
		{"nobody leads", func(ctx context.Context, f *electionfake.Fake) error {
			_, err := f.SetLeader(ctx, "")
			return err
		}, ""},
		{"deposed with a reason", func(ctx context.Context, f *electionfake.Fake) error {
			if _, err := f.Elect(ctx); err != nil {
				return err
			}
			return f.Depose(ctx, election.ReasonError)
		}, "leader:me elected+returned demoted:error leader:"},
		{"transfer", func(ctx context.Context, f *electionfake.Fake) error {
			if err := f.Transfer(ctx, "other"); !errors.Is(err, election.ErrNotLeader) {
				return errors.New("Transfer by a follower did not fail with ErrNotLeader")
			}
			if _, err := f.Elect(ctx); err != nil {
				return err
			}
			if err := f.Transfer(ctx, ""); !errors.Is(err, election.ErrInvalidConfig) {
				return errors.New("Transfer to an empty ID did not fail with ErrInvalidConfig")
			}
			if err := f.Transfer(ctx, "me"); err != nil || !f.IsLeader() {
				return errors.New("Transfer to itself was not a no-op")
			}
			return f.Transfer(ctx, "other")
		}, "leader:me elected+returned demoted:transferred leader:other"},
		{"proclaim", func(ctx context.Context, f *electionfake.Fake) error {
			if err := f.Proclaim(ctx, "v"); !errors.Is(err, election.ErrNotLeader) {
				return errors.New("Proclaim by a follower did not fail with ErrNotLeader")
			}
			term, err := f.Elect(ctx)
			if err != nil {
				return err
			}
			if err := f.Proclaim(ctx, "v2"); err != nil {
				return err
			}
			if rec, err := f.Leader(ctx); err != nil || rec.Value != "v2" || rec.Term != term {
				return errors.New("Leader after Proclaim: not the value, or another term")
			}
			return nil
		}, "leader:me leader:me"},
		{"depose a follower", func(ctx context.Context, f *electionfake.Fake) error {
			if err := f.Depose(ctx, ""); !errors.Is(err, election.ErrNotLeader) {
				return errors.New("Depose of a follower did not fail with ErrNotLeader")
			}
			return nil
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, l, ctx := start(t, election.Config{ID: "me"})
				if err := tc.drive(ctx, f); err != nil {
					t.Fatal(err)
				}
				// Each driving method returns after its callbacks (but
				// OnElected, which returned here since each leadership ended).
				if got := l.String(); got != tc.want {
					t.Errorf("callbacks: %q, want %q", got, tc.want)
				}
			})
		})
	}
}

func TestLeaderRecord(t *testing.T) { synctest.Test(t, testLeaderRecord) }

func testLeaderRecord(t *testing.T) {
	f, _, ctx := start(t, election.Config{ID: "me", Value: "10.0.0.1:80", LeaseDuration: 3 * time.Second, Preference: election.PreferenceConfig{Priority: 7}})
	if _, err := f.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader() before anyone leads: %v, want ErrNoLeader", err)
	}
	term, err := f.Elect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.Leader(ctx)
	if err != nil || rec.ID != "me" || rec.Term != term || rec.Value != "10.0.0.1:80" || rec.Priority != 7 || !rec.Live() ||
		rec.Lease != 3*time.Second || rec.Election != "e-test" || rec.Backend != electionfake.Backend {
		t.Fatalf("Leader() = %+v, %v", rec, err)
	}
	if f.Term() != term || !f.IsLeader() {
		t.Fatalf("Term() = %d, IsLeader() = %v; want %d, true", f.Term(), f.IsLeader(), term)
	}
	other, err := f.SetLeader(ctx, "other")
	if err != nil || other <= term {
		t.Fatalf("SetLeader: term %d, %v; want above %d", other, err, term)
	}
	if rec, err := f.Leader(ctx); err != nil || rec.ID != "other" || rec.Value != "" || rec.Priority != 0 {
		t.Fatalf("Leader() = %+v, %v", rec, err)
	}
}

func TestFenced(t *testing.T) { synctest.Test(t, testFenced) }

func testFenced(t *testing.T) {
	f, _, ctx := start(t, election.Config{ID: "me"})
	calls := 0
	fn := func(tx *sql.Tx) error {
		calls++
		if tx != nil {
			return errors.New("a tx from a fake without a database")
		}
		return nil
	}
	if err := f.Fenced(ctx, fn); !errors.Is(err, election.ErrNotLeader) || calls != 0 {
		t.Fatalf("Fenced by a follower: %v after %d calls, want ErrNotLeader and none", err, calls)
	}
	if _, err := f.Elect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Fenced(ctx, fn); err != nil || calls != 1 {
		t.Fatalf("Fenced by the leader: %v after %d calls", err, calls)
	}
	boom := errors.New("boom")
	f.FailFenced(boom)
	if err := f.Fenced(ctx, fn); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("Fenced after FailFenced: %v after %d calls", err, calls)
	}
	f.FailFenced(nil)
	if err := f.Fenced(ctx, fn); err != nil || calls != 2 {
		t.Fatalf("Fenced after FailFenced(nil): %v after %d calls", err, calls)
	}
}

func TestResignObserved(t *testing.T) { synctest.Test(t, testResignObserved) }

func testResignObserved(t *testing.T) {
	f, _, ctx := start(t, election.Config{ID: "me"})
	if _, err := f.Elect(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.Resign(ctx) }() // the code under test
	select {
	case <-f.Resigned():
	case <-ctx.Done():
		t.Fatal("Resign not observed")
	}
	if n := f.Resigns(); n != 1 {
		t.Fatalf("Resigns() = %d, want 1", n)
	}
	if f.IsLeader() {
		t.Fatal("IsLeader() after Resign")
	}
}

func TestRunTwiceAndWaitForRun(t *testing.T) { synctest.Test(t, testRunTwiceAndWaitForRun) }

func testRunTwiceAndWaitForRun(t *testing.T) {
	f, err := electionfake.New(election.Config{Name: "e", ID: "me"})
	if err != nil {
		t.Fatal(err)
	}
	// A driving method waits for Run, until its context ends.
	short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := f.Elect(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Elect without Run: %v, want DeadlineExceeded", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer tcancel()
	if _, err := f.Elect(tctx); err != nil { // waits for Run to start
		t.Fatal(err)
	}
	if err := f.Run(tctx); !errors.Is(err, election.ErrAlreadyRunning) {
		t.Fatalf("second Run: %v, want ErrAlreadyRunning", err)
	}
	stop()
	if err := <-done; err != nil || f.IsLeader() {
		t.Fatalf("Run returned %v; IsLeader() = %v", err, f.IsLeader())
	}
}

func TestNewValidates(t *testing.T) { synctest.Test(t, testNewValidates) }

func testNewValidates(t *testing.T) {
	for _, cfg := range []election.Config{{}, {Name: "bad name"}, {Name: "e", ID: "a\x00b"}, {Name: "e", Value: strings.Repeat("v", 1025)}, {Name: "e", Value: "\xff"}} {
		if _, err := electionfake.New(cfg); !errors.Is(err, election.ErrInvalidConfig) {
			t.Errorf("New(%+v): %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// healthSwitch is a Config.Health.Check whose answer the test sets.
type healthSwitch struct {
	mu  sync.Mutex
	err error
	ctx context.Context // the last check's context
}

func (h *healthSwitch) set(err error) { h.mu.Lock(); h.err = err; h.mu.Unlock() }

func (h *healthSwitch) check(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ctx = ctx
	return h.err
}

// Config.Health.Check as a real candidate honours it: a failing leader
// stands down with ReasonUnhealthy and the row is released; a failing
// follower is not elected; a passing check changes nothing.
func TestHealthCheck(t *testing.T) {
	sick := errors.New("disk full")
	tests := []struct {
		name        string
		drive       func(ctx context.Context, f *electionfake.Fake, h *healthSwitch) error
		want        string // the callbacks
		leader      bool
		healthy     bool
		wantChecked bool // the check ran with the driving method's context
	}{
		{"failing leader stands down", func(ctx context.Context, f *electionfake.Fake, h *healthSwitch) error {
			if _, err := f.Elect(ctx); err != nil {
				return err
			}
			h.set(sick)
			if err := f.CheckHealth(ctx); !errors.Is(err, electionfake.ErrUnhealthy) || !errors.Is(err, sick) {
				return fmt.Errorf("CheckHealth = %v, want ErrUnhealthy wrapping the check's error", err)
			}
			return nil
		}, "leader:me elected+returned demoted:unhealthy leader:", false, false, true},
		{"passing leader leads on", func(ctx context.Context, f *electionfake.Fake, h *healthSwitch) error {
			if _, err := f.Elect(ctx); err != nil {
				return err
			}
			return f.CheckHealth(ctx)
		}, "leader:me", true, true, true},
		{"failing follower is not elected", func(ctx context.Context, f *electionfake.Fake, h *healthSwitch) error {
			h.set(sick)
			if err := f.CheckHealth(ctx); !errors.Is(err, electionfake.ErrUnhealthy) {
				return fmt.Errorf("CheckHealth of a failing follower = %v, want ErrUnhealthy", err)
			}
			if term, err := f.Elect(ctx); !errors.Is(err, electionfake.ErrUnhealthy) || !errors.Is(err, sick) || term != 0 {
				return fmt.Errorf("Elect while unhealthy = %d, %v; want 0 and ErrUnhealthy", term, err)
			}
			if _, err := f.SetLeader(ctx, "me"); !errors.Is(err, electionfake.ErrUnhealthy) {
				return fmt.Errorf("SetLeader(me) while unhealthy = %v, want ErrUnhealthy", err)
			}
			if _, err := f.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
				return fmt.Errorf("Leader() after a refused Elect = %v, want ErrNoLeader", err)
			}
			return nil
		}, "", false, false, true},
		{"follower elected once healthy again", func(ctx context.Context, f *electionfake.Fake, h *healthSwitch) error {
			h.set(sick)
			if _, err := f.Elect(ctx); !errors.Is(err, electionfake.ErrUnhealthy) {
				return fmt.Errorf("Elect while unhealthy = %v", err)
			}
			h.set(nil)
			_, err := f.Elect(ctx)
			return err
		}, "leader:me", true, true, true},
		{"others' leadership needs no check", func(ctx context.Context, f *electionfake.Fake, h *healthSwitch) error {
			h.set(sick)
			_, err := f.SetLeader(ctx, "other")
			return err
		}, "leader:other", false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &healthSwitch{}
				f, l, ctx := start(t, election.Config{ID: "me", Health: election.HealthConfig{Check: h.check}})
				if err := tc.drive(ctx, f, h); err != nil {
					t.Fatal(err)
				}
				if got := l.String(); got != tc.want {
					t.Errorf("callbacks: %q, want %q", got, tc.want)
				}
				if f.IsLeader() != tc.leader || f.Healthy() != tc.healthy {
					t.Errorf("IsLeader() = %v, Healthy() = %v; want %v, %v", f.IsLeader(), f.Healthy(), tc.leader, tc.healthy)
				}
				h.mu.Lock()
				checked := h.ctx == ctx
				h.mu.Unlock()
				if checked != tc.wantChecked {
					t.Errorf("the check ran with the driving method's context: %v, want %v", checked, tc.wantChecked)
				}
			})
		})
	}
}

// Without a HealthCheck, CheckHealth passes and Elect needs nothing.
func TestNoHealthCheck(t *testing.T) { synctest.Test(t, testNoHealthCheck) }

func testNoHealthCheck(t *testing.T) {
	f, _, ctx := start(t, election.Config{ID: "me"})
	if err := f.CheckHealth(ctx); err != nil || !f.Healthy() {
		t.Fatalf("CheckHealth without a HealthCheck = %v, Healthy() = %v", err, f.Healthy())
	}
	if _, err := f.Elect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckHealth(ctx); err != nil || !f.IsLeader() {
		t.Fatalf("CheckHealth of a leader without a HealthCheck = %v, IsLeader() = %v", err, f.IsLeader())
	}
}

// Resign without Run fails with ErrNotRunning, as the real backends'.
func TestResignNotRunning(t *testing.T) { synctest.Test(t, testResignNotRunning) }

func testResignNotRunning(t *testing.T) {
	f, err := electionfake.New(election.Config{Name: "e", ID: "me"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Resign(context.Background()); !errors.Is(err, election.ErrNotRunning) {
		t.Fatalf("Resign without Run = %v, want ErrNotRunning", err)
	}
}

func TestLeadershipFenced(t *testing.T) { synctest.Test(t, testLeadershipFenced) }

// testLeadershipFenced checks that the Leadership OnElected receives fences
// while that leadership lasts, and not after it, even when a later one of
// the same candidate has begun.
func testLeadershipFenced(t *testing.T) {
	ls := make(chan election.Leadership, 2)
	f, err := electionfake.New(election.Config{Name: "e-test", ID: "me", Callbacks: election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) { ls <- l; <-ctx.Done() }}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	elect := func() election.Leadership {
		if _, err := f.Elect(ctx); err != nil {
			t.Fatal(err)
		}
		return <-ls
	}
	calls := 0
	fn := func(*sql.Tx) error { calls++; return nil }
	first := elect()
	if first.Term != f.Term() {
		t.Fatalf("Leadership.Term %d, Term() %d", first.Term, f.Term())
	}
	if err := first.Fenced(ctx, fn); err != nil || calls != 1 {
		t.Fatalf("Fenced of the leadership: %v after %d calls", err, calls)
	}
	if err := f.Depose(ctx, election.ReasonDeposed); err != nil {
		t.Fatal(err)
	}
	second := elect()
	if err := first.Fenced(ctx, fn); !errors.Is(err, election.ErrNotLeader) || calls != 1 {
		t.Fatalf("Fenced of the ended leadership: %v after %d calls, want ErrNotLeader and none", err, calls)
	}
	if err := second.Fenced(ctx, fn); err != nil || calls != 2 {
		t.Fatalf("Fenced of the second leadership (term %d): %v after %d calls", second.Term, err, calls)
	}
}
