package operator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/operator"
)

// observations collects what Observe reports, for the test to wait on.
type observations struct {
	mu   sync.Mutex
	seen []string
	ch   chan struct{} // closed and replaced at each report
}

func newObservations() *observations { return &observations{ch: make(chan struct{})} }

func (o *observations) see(rec election.Record, err error) error {
	s := "live:" + rec.ID
	switch {
	case errors.Is(err, election.ErrNoSuchElection):
		s = "missing"
	case errors.Is(err, election.ErrNoLiveLease) && rec.Released:
		s = "released"
	case errors.Is(err, election.ErrNoLiveLease):
		s = "expired"
	case err != nil:
		s = "error:" + err.Error()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, s)
	close(o.ch)
	o.ch = make(chan struct{})
	return nil
}

// await waits until Observe reported want, and returns how long that took.
func (o *observations) await(t *testing.T, want string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timeout := time.After(within)
	for {
		o.mu.Lock()
		ch := o.ch
		for _, s := range o.seen {
			if s == want {
				o.mu.Unlock()
				return time.Since(start)
			}
		}
		seen := fmt.Sprint(o.seen)
		o.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("Observe did not report %q within %v; it reported %s", want, within, seen)
		}
	}
}

// TestObserve follows an election without campaigning, on a real server:
// the first look, an election, a clean handover, and the end of Observe
// when its context ends. The table backend's handover is seen at once
// through the holder's hint although the next look is a minute away; the
// lock backend has no hint, and a resign is seen at the next look.
func TestObserve(t *testing.T) {
	for _, backend := range []string{"table", "lock"} {
		t.Run(backend, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dsn := testdb.DSN(t)
			testdb.Migrate(t, dsn)
			db := testdb.Open(t, dsn)
			name := "observe-" + randHex(4)
			// A long lease and retry interval: only the hint can make
			// the table backend's handover visible within seconds.
			lease, retry := 30*time.Second, time.Minute
			if backend == "lock" {
				lease, retry = 2*time.Second, 100*time.Millisecond
			}
			// start runs candidate id; elected is closed when it leads.
			start := func(id string) (elected <-chan struct{}, stop func()) {
				ch := make(chan struct{})
				var once sync.Once
				cfg := election.Config{Name: name, ID: id, LeaseDuration: lease, Tuning: election.TuningConfig{RetryInterval: 100 * time.Millisecond, DisableLockDelay: true},
					Callbacks: election.Callbacks{
						OnElected: func(context.Context, election.Leadership) { once.Do(func() { close(ch) }) }}}
				newE := election.NewTable
				if backend == "lock" {
					newE = election.NewLock
				}
				e, err := newE(db, cfg)
				if err != nil {
					t.Fatal(err)
				}
				rctx, rcancel := context.WithCancel(ctx)
				rdone := make(chan error, 1)
				go func() { rdone <- e.Run(rctx) }()
				return ch, func() {
					rcancel()
					if err := <-rdone; err != nil {
						t.Errorf("%s: Run: %v", id, err)
					}
				}
			}
			observe := func(o *observations) (stop func()) {
				octx, ocancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() {
					done <- ops(db).Observe(octx, name, operator.ObserveOptions{Interval: retry}, o.see)
				}()
				return func() {
					ocancel()
					if err := <-done; err != nil {
						t.Errorf("Observe returned %v when its context ended, want nil", err)
					}
				}
			}

			// The first look reports what is there: no row yet.
			o := newObservations()
			stop := observe(o)
			o.await(t, "missing", 10*time.Second)
			stop()

			// Nobody keeps a hint while nobody leads (a new row is seen at
			// the next look), so this observer starts once a leads.
			electedA, stopA := start("a")
			select {
			case <-electedA:
			case <-ctx.Done():
				t.Fatal("a was not elected")
			}
			o = newObservations()
			defer observe(o)()
			o.await(t, "live:a", 10*time.Second)

			_, stopB := start("b")
			defer stopB()
			stopA() // a resigns: b takes the released row at once
			took := o.await(t, "live:b", 10*time.Second)
			t.Logf("%s: the handover was observed %v after a resigned (lease %v, retry interval %v)", backend, took, lease, retry)
		})
	}
}

// TestObserveRefusesWhatLookingCannotFix: a missing table ends Observe with
// ErrTableMissing, an invalid name with ErrInvalidConfig, without calling
// see.
func TestObserveRefusesWhatLookingCannotFix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := testdb.Open(t, testdb.DSN(t)) // no table
	for _, tc := range []struct {
		name string
		want error
	}{
		{"bad name", election.ErrInvalidConfig},
		{"no-table", election.ErrTableMissing},
	} {
		err := ops(db).Observe(ctx, tc.name, operator.ObserveOptions{}, func(r election.Record, err error) error {
			t.Errorf("%s: see called with %+v, %v", tc.name, r, err)
			return nil
		})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Observe = %v, want %v", tc.name, err, tc.want)
		}
	}
}
