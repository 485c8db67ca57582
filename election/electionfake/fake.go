// Package electionfake is an in-memory election.Election for the unit tests
// of code that uses package election: no database, no timing. The test
// drives the fake directly: it makes this candidate leader (Elect), hands
// the election to another candidate (SetLeader), ends the leadership with a
// reason (Depose), fails its health check (CheckHealth, with
// Config.Health.Check), makes Fenced fail (FailFenced) and observes the
// code's calls to Resign (Resigns, Resigned).
//
// The fake keeps the callbacks' contract of the real backends (see
// election.Callbacks), which the behaviour suite's contract tests
// (electiontest.RunContract) check against both:
//
//   - OnLeaderChanged and OnDemoted are called on the goroutine running Run,
//     one at a time and in order.
//   - OnElected is called in a new goroutine when this candidate starts to
//     lead, after IsLeader turned true and after OnLeaderChanged named this
//     candidate. Its context is cancelled when the leadership ends, and Run
//     waits for OnElected to return before it calls OnDemoted and before it
//     returns. At most one OnElected runs at a time.
//   - OnDemoted is called exactly once for every OnElected, after OnElected
//     returned and before Run returns, with the reason the test gave to
//     Depose, election.ReasonDeposed after SetLeader named another
//     candidate, election.ReasonResigned after Resign or the end of Run's
//     context, election.ReasonTransferred after Transfer, and
//     election.ReasonUnhealthy after a CheckHealth that failed.
//
// Config.Health.Check is honoured at the points the test drives. A real
// candidate runs it beside its campaign, every Health.Interval, and
// acts on the latest result; the fake runs it when the test says: a
// follower campaigns only while its check passes, so Elect (and SetLeader
// naming this candidate) runs it first and, when it fails, elects nobody
// and returns an error wrapping ErrUnhealthy; CheckHealth stands for one
// run of the check: a failing check stands a leader down with
// election.ReasonUnhealthy (OnDemoted), and OnLeaderChanged then reports
// that nobody leads, since a real leader releases the row. Healthy reports
// the last check's outcome. The check runs on the goroutine running Run,
// with the driving method's context, bounded by Health.Timeout when
// set.
//
// What the fake does not model: leases and clocks (a leadership ends only
// when the test or the code under test ends it; nothing runs the health
// check but Elect, SetLeader and CheckHealth, and no hold-down applies), other candidates (each Fake is one
// candidate; SetLeader names the others, with priority 0, and this
// candidate never asks for leadership by Config.Preference.Priority, which only shows
// in its own records), the elector's own health (electionhttp.HealthzHandler
// answers "ok" for a fake and StatusHandler's JSON leaves healthy out and
// says wedged false), and the database (Fenced runs fn with a nil *sql.Tx).
//
// The driving methods (Elect, SetLeader, Depose, CheckHealth) are carried
// out on the goroutine running Run, like the real backends' changes: they
// wait until Run runs, and return once the change and its OnLeaderChanged
// and OnDemoted callbacks are done (OnElected has then been started, in its own
// goroutine). All methods are safe for concurrent use. Do not call the
// driving methods or Resign from a callback: OnLeaderChanged and OnDemoted
// run on Run's goroutine, and Run waits for OnElected to return before it
// ends a leadership (the real backends' Resign has the same limits).
package electionfake

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/ident"
)

// Backend is the Record.Backend and Record.Acquired of the fake's records.
const Backend = "fake"

// ErrUnhealthy is wrapped, with the check's own error, by the errors of
// Elect, SetLeader and CheckHealth when Config.Health.Check fails.
var ErrUnhealthy = errors.New("electionfake: health check failing")

// Fake is one candidate of an in-memory election. Create it with New and
// run it with Run, as a real election.Election.
type Fake struct {
	cfg      election.Config
	reqs     chan func() // changes carried out on the Run goroutine
	running  atomic.Bool
	resigns  atomic.Int64  // Resign calls
	resigned chan struct{} // closed at the first Resign

	// Read by IsLeader, Term and Healthy from any goroutine.
	term      atomic.Uint64 // the term this candidate leads in; 0 while it does not
	unhealthy atomic.Bool   // the last Health.Check failed

	fencedErr atomic.Pointer[error] // set by FailFenced; nil or a nil error: none

	record atomic.Pointer[election.Record] // who holds the election; ID empty when nobody; written on the Run goroutine

	// Owned by the Run goroutine; cfg.Value is the value published:
	// Config.Value, or what Proclaim set.
	lastTerm   uint64
	cancelLead context.CancelFunc
	leadDone   chan struct{}
}

var _ election.Election = (*Fake)(nil)

// New returns a fake candidate configured by cfg: Name (required, as for
// the real backends), ID (default election.DefaultID()), Value, Callbacks,
// Health.Check and Health.Timeout (see the package documentation),
// LeaseDuration (shown in records; default election.DefaultLeaseDuration)
// and Tuning.Clock (for the records' times and Demotion.Until; default nil:
// the time package's) are used, the other fields ignored. Like the real
// constructors it copies cfg and returns an error wrapping
// election.ErrInvalidConfig for a bad Name, ID or Value.
func New(cfg election.Config) (*Fake, error) {
	cfg.ID = cmp.Or(cfg.ID, election.DefaultID())
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, election.DefaultLeaseDuration)
	if err := errors.Join(ident.Name(cfg.Name), ident.ID(cfg.ID), ident.Value(cfg.Value)); err != nil {
		return nil, err
	}
	f := &Fake{cfg: cfg, reqs: make(chan func()), resigned: make(chan struct{})}
	f.record.Store(&election.Record{Election: cfg.Name})
	return f, nil
}

// Name implements election.Election.
func (f *Fake) Name() string { return f.cfg.Name }

// ID implements election.Election.
func (f *Fake) ID() string { return f.cfg.ID }

// IsLeader implements election.Election: true from Elect (or SetLeader
// naming this candidate) until the leadership ends.
func (f *Fake) IsLeader() bool { return f.term.Load() != 0 }

// Term implements election.Election.
func (f *Fake) Term() uint64 { return f.term.Load() }

// Run implements election.Election. It carries out the driving methods'
// changes until ctx ends; then, if this candidate leads, it stands down
// (OnDemoted with election.ReasonResigned, then OnLeaderChanged reporting
// that nobody leads) and returns nil. A second
// concurrent call returns election.ErrAlreadyRunning.
func (f *Fake) Run(ctx context.Context) error {
	if !f.running.CompareAndSwap(false, true) {
		return election.ErrAlreadyRunning
	}
	defer f.running.Store(false)
	for {
		select {
		case <-ctx.Done():
			f.release(election.ReasonResigned) // on the way out
			return nil
		case change := <-f.reqs:
			change()
		}
	}
}

// do carries out fn on the Run goroutine: it waits until Run takes it (or
// ctx ends) and until fn returned, and returns fn's error.
func (f *Fake) do(ctx context.Context, fn func() error) error {
	done := make(chan error, 1) // buffered: Run never blocks on it
	select {
	case f.reqs <- func() { done <- fn() }:
	case <-ctx.Done():
		return fmt.Errorf("electionfake: waiting for Run: %w", ctx.Err())
	}
	return <-done // Run finishes a change it took before anything else
}

// Elect makes this candidate the leader with a new term, higher than every
// term the fake gave before: OnLeaderChanged names it, IsLeader turns true,
// and OnElected starts in its own goroutine. It returns the term; when the
// candidate already leads it changes nothing and returns the current term.
// With Config.Health.Check, a candidate that does not lead runs the check
// first, as a real follower does before it campaigns: when it fails,
// nothing changes and Elect returns an error wrapping ErrUnhealthy. It
// waits for Run, and returns ctx's error when ctx ends first.
func (f *Fake) Elect(ctx context.Context) (uint64, error) {
	return f.SetLeader(ctx, f.cfg.ID)
}

// SetLeader makes candidate id hold the election with a new term (returned),
// as another candidate's takeover or an operator's Assume would: when this
// candidate led, it is deposed first (OnDemoted with
// election.ReasonDeposed); then OnLeaderChanged reports id. An empty id
// means nobody holds a live lease (term 0). SetLeader with this candidate's
// own ID is Elect (with its health check). It waits for Run, and returns
// ctx's error when ctx ends first.
func (f *Fake) SetLeader(ctx context.Context, id string) (uint64, error) {
	var term uint64
	err := f.do(ctx, func() error {
		if id == f.cfg.ID {
			if term = f.term.Load(); term != 0 {
				return nil
			}
			if err := f.check(ctx); err != nil {
				return err // an unhealthy candidate does not campaign
			}
		}
		f.demote(election.ReasonDeposed)
		term = f.setRecord(election.Record{ID: id})
		if id == f.cfg.ID {
			f.lead(term)
		}
		return nil
	})
	return term, err
}

// CheckHealth runs Config.Health.Check once, as a real candidate's health
// goroutine does every Health.Interval, and returns nil when it passes
// (or there is none), else an error wrapping ErrUnhealthy and the check's
// error. A leader whose check fails stands down as a real one does:
// IsLeader turns false, the elected context is cancelled, OnElected is
// waited for, OnDemoted is called with election.ReasonUnhealthy, and then
// OnLeaderChanged reports that nobody leads (the row was released). A
// follower's failing check changes nothing but Healthy, and keeps Elect
// from electing it while it fails. It waits for Run, and returns ctx's
// error when ctx ends first.
func (f *Fake) CheckHealth(ctx context.Context) error {
	return f.do(ctx, func() error {
		err := f.check(ctx)
		if err != nil {
			f.release(election.ReasonUnhealthy)
		}
		return err
	})
}

// Healthy reports whether the last run of Config.Health.Check passed: true
// before the first run and without a Health.Check.
func (f *Fake) Healthy() bool { return !f.unhealthy.Load() }

// check runs Config.Health.Check, if any, bounded by Health.Timeout
// when set, records its outcome and returns its error wrapped with
// ErrUnhealthy. Run goroutine only.
func (f *Fake) check(ctx context.Context) error {
	if f.cfg.Health.Check == nil {
		return nil
	}
	if d := f.cfg.Health.Timeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	err := f.cfg.Health.Check(ctx)
	f.unhealthy.Store(err != nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnhealthy, err)
	}
	return nil
}

// Depose ends this candidate's leadership with reason (election.ReasonDeposed
// when empty), as a lost lease (election.ReasonLeaseLost), a takeover or a
// permanent error would: IsLeader turns false, the elected context is
// cancelled, OnElected is waited for, OnDemoted is called, and then
// OnLeaderChanged reports that nobody leads (use SetLeader to name a new
// holder instead). It returns an error wrapping election.ErrNotLeader when
// this candidate does not lead. It waits for Run, and returns an error when
// ctx ends first.
func (f *Fake) Depose(ctx context.Context, reason election.Reason) error {
	reason = cmp.Or(reason, election.ReasonDeposed)
	return f.leaderDo(ctx, "depose", func() { f.release(reason) })
}

// Resign implements election.Election: when this candidate leads it stands
// down (OnDemoted with election.ReasonResigned) and then OnLeaderChanged
// reports that nobody leads. Every call is counted (see Resigns). It returns
// nil when this candidate does not lead, an error wrapping
// election.ErrNotRunning when Run is not running, and ctx's error when ctx
// ends first.
func (f *Fake) Resign(ctx context.Context) error {
	if !f.running.Load() {
		return fmt.Errorf("electionfake: resign: %w", election.ErrNotRunning)
	}
	return f.do(ctx, func() error {
		first := f.resigns.Add(1) == 1
		f.release(election.ReasonResigned)
		if first {
			close(f.resigned) // after the release: a waiter finds it done
		}
		return nil
	})
}

// Transfer implements election.Election: when this candidate leads and to
// is another candidate, it stands down (OnDemoted with
// election.ReasonTransferred) and to holds the election with a new term
// (OnLeaderChanged reports it), as a transfer to a running candidate does.
// It returns nil for this candidate's own ID, an error wrapping
// election.ErrNotLeader when this candidate does not lead, one wrapping
// election.ErrInvalidConfig for an invalid ID, and ctx's error when ctx
// ends first. Like the driving methods, it waits for Run.
func (f *Fake) Transfer(ctx context.Context, to string) error {
	if err := ident.ID(to); err != nil {
		return fmt.Errorf("electionfake: transfer: %w", err)
	}
	return f.leaderDo(ctx, "transfer", func() {
		if to != f.cfg.ID {
			f.demote(election.ReasonTransferred)
			f.setRecord(election.Record{ID: to})
		}
	})
}

// Proclaim implements election.Election: when this candidate leads, its
// published value becomes value (Leader's Record.Value; OnLeaderChanged
// reports the change), for this and later terms, without a re-election.
// Errors as for Transfer (ErrInvalidConfig for a value that is not
// valid UTF-8 of at most 1024 bytes, as Candidate.Proclaim).
func (f *Fake) Proclaim(ctx context.Context, value string) error {
	if err := ident.Value(value); err != nil {
		return fmt.Errorf("electionfake: proclaim: %w", err)
	}
	return f.leaderDo(ctx, "proclaim", func() {
		f.cfg.Value = value
		r := *f.record.Load()
		r.Value = value
		f.publish(r)
	})
}

// leaderDo runs fn on the Run goroutine (waiting for Run) if this
// candidate leads; what names the operation in errors.
func (f *Fake) leaderDo(ctx context.Context, what string, fn func()) error {
	return f.do(ctx, func() error {
		if f.term.Load() == 0 {
			return fmt.Errorf("electionfake: %s: %w", what, election.ErrNotLeader)
		}
		fn()
		return nil
	})
}

// Resigns returns how many times Resign was called (while Run ran).
func (f *Fake) Resigns() int { return int(f.resigns.Load()) }

// Resigned returns a channel closed when Resign is first called (while Run
// ran), once the candidate stood down, for a test to wait on code that
// resigns from another goroutine.
func (f *Fake) Resigned() <-chan struct{} { return f.resigned }

// Leader implements election.Election: the record of the current holder as
// set by Elect and SetLeader (Backend and Acquired "fake", the lease always
// full), or, when nobody holds the election, an empty record and an error
// wrapping election.ErrNoLeader. It returns ctx's error when ctx has ended.
func (f *Fake) Leader(ctx context.Context) (election.Record, error) {
	if err := ctx.Err(); err != nil {
		return election.Record{}, err
	}
	rec := *f.record.Load()
	if rec.ID == "" {
		return rec, fmt.Errorf("%w: election %q has no live lease", election.ErrNoLeader, f.cfg.Name)
	}
	rec.LastRenewal = f.now()
	return rec, nil
}

// Fenced implements election.Election. When FailFenced set an error, it
// returns that error without calling fn. Otherwise, when this candidate does
// not lead, it returns an error wrapping election.ErrNotLeader without
// calling fn. Otherwise it returns fn(nil): the fake has no database.
//
// The Leadership OnElected receives fences the same way, but fails
// (wrapping election.ErrNotLeader) once that leadership ended.
func (f *Fake) Fenced(_ context.Context, fn func(tx *sql.Tx) error) error {
	return f.fenced(context.Background(), 0, fn)
}

// fenced is Fenced for the leadership of term (0: the current one) whose
// elected context is lctx (context.Background() for none).
func (f *Fake) fenced(lctx context.Context, term uint64, fn func(tx *sql.Tx) error) error {
	if ferr := f.fencedErr.Load(); ferr != nil && *ferr != nil {
		return *ferr
	}
	if now := f.Term(); now == 0 || term != 0 && now != term || lctx.Err() != nil {
		return fmt.Errorf("%w: election %q not held by %q", election.ErrNotLeader, f.cfg.Name, f.cfg.ID)
	}
	return fn(nil)
}

// FailFenced makes every later Fenced call return err without calling fn,
// until FailFenced(nil). Pass an error wrapping election.ErrNotLeader to
// model a leader deposed before it noticed, or any other error for a
// database failure.
func (f *Fake) FailFenced(err error) { f.fencedErr.Store(&err) }

// setRecord makes r's holder (nobody when r.ID is empty) hold the election
// with a new term, and reports the change through OnLeaderChanged. It
// returns the term (0 for nobody). Run goroutine only.
func (f *Fake) setRecord(r election.Record) uint64 {
	now := f.now()
	r.Election = f.cfg.Name
	if r.ID != "" {
		f.lastTerm++
		r.Term, r.Since, r.LastRenewal = f.lastTerm, now, now
		r.Lease, r.LeaseLeft = f.cfg.LeaseDuration, f.cfg.LeaseDuration
		r.Acquired, r.Backend = Backend, Backend
		if r.ID == f.cfg.ID {
			r.Value, r.Priority = f.cfg.Value, f.cfg.Preference.Priority
		}
	}
	f.publish(r)
	return r.Term
}

// publish makes r the record, and reports it through OnLeaderChanged when
// its holder, term or value differs from the record before. Run goroutine
// only.
func (f *Fake) publish(r election.Record) {
	old := *f.record.Swap(&r)
	if cb := f.cfg.Callbacks.OnLeaderChanged; cb != nil && (r.ID != old.ID || r.Term != old.Term || r.Value != old.Value) {
		cb(r)
	}
}

// lead starts a leadership of term: IsLeader turns true, then OnElected
// starts in its own goroutine. Run goroutine only.
func (f *Fake) lead(term uint64) {
	f.term.Store(term)
	lctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	f.cancelLead, f.leadDone = cancel, done
	go func() {
		defer close(done)
		if cb := f.cfg.Callbacks.OnElected; cb != nil {
			cb(lctx, election.Leadership{Term: term, Fenced: func(_ context.Context, fn func(*sql.Tx) error) error {
				return f.fenced(lctx, term, fn)
			}})
		}
	}()
}

// demote ends the current leadership, if any, and reports whether there was
// one: IsLeader turns false, the elected context is cancelled, OnElected is
// waited for and OnDemoted called. Run goroutine only.
func (f *Fake) demote(reason election.Reason) bool {
	term := f.term.Swap(0)
	if term == 0 {
		return false
	}
	until := f.now()
	f.cancelLead()
	<-f.leadDone
	if cb := f.cfg.Callbacks.OnDemoted; cb != nil {
		cb(election.Demotion{Term: term, Reason: reason, Until: until})
	}
	return true
}

// release ends the current leadership, if any, as demote does, and then
// reports that nobody leads: the leader released the row. Run goroutine
// only.
func (f *Fake) release(reason election.Reason) {
	if f.demote(reason) {
		f.setRecord(election.Record{})
	}
}

// now reads Tuning.Clock, or the time package's clock when it is nil.
func (f *Fake) now() time.Time {
	if c := f.cfg.Tuning.Clock; c != nil {
		return c.Now().Round(0)
	}
	return time.Now().Round(0)
}
