package operator

import (
	"context"
	"errors"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/probe"
)

// ObserveOptions says how often Observe looks. The zero value of each field
// means its default.
type ObserveOptions struct {
	// Interval is the time between two looks. Default 2 s.
	Interval time.Duration
	// JitterFactor spreads the looks as election's
	// Config.Tuning.JitterFactor does. Default 0.2; negative for none.
	JitterFactor float64
	// QueryTimeout bounds each statement. Default 5 s, as
	// election.Config.Tuning.QueryTimeout.
	QueryTimeout time.Duration
	// Metrics receives the errors and skipped hints. Default nil: none.
	Metrics election.Metrics
}

// Observe follows an election without campaigning, as etcd's
// Election.Observe does: it writes nothing, and reports what it sees of
// the election's row to see.
//
// It follows election name; errors are reported to opts.Metrics as
// Heartbeat, skipped hints as HandoverSkipped.
//
// see is called on Observe's goroutine with the outcome of the first look,
// then with that of every look that differs from the one before: the live
// leader, its term, value or priority, whether the row is live, released,
// expired or missing, or the error. Its arguments are those of Status: the
// record, and nil, an error wrapping election.ErrNoSuchElection or
// ErrNoLiveLease (both match ErrNoLeader), or a transient database error
// (Observe goes on looking). A non-nil error from see ends Observe, which
// returns it.
//
// Looks are timed by the database clock as a follower's are: every
// opts.Interval, and also when the live lease runs out by the database
// clock (LeaseLeft), so that a failover is seen within a look of when it
// may happen. While nobody leads, a look that found the row free, or
// missing, is followed by looks 10 ms, 20 ms, 40 ms … later, up to
// opts.Interval, since a candidate usually takes a free row at once. With
// the table backend a holder keeps a handover hint
// (getlock.WakeName); Observe waits on it between looks, on a
// connection of the pool when the pool has one to spare, so that a clean
// handover (a resign, a transfer) is seen within milliseconds. A
// lock-backend election has no hint (waiting on the election's own lock
// would take it from the candidates), so it is seen at the next look.
//
// Observe returns nil when ctx ends, see's error, or an error that looking
// again cannot fix (election.ErrTableMissing, ErrAccessDenied,
// ErrSchemaMismatch, an invalid name or option).
func (o *Operator) Observe(ctx context.Context, name string, opts ObserveOptions, see func(election.Record, error) error) error {
	cfg, err := election.Config{Name: name, Table: o.table, Metrics: opts.Metrics, Tuning: election.TuningConfig{
		RetryInterval: opts.Interval, JitterFactor: opts.JitterFactor, QueryTimeout: opts.QueryTimeout}}.WithDefaults()
	if err != nil {
		return err
	}
	w := watch{o: o, name: name, t: cfg.Tuning, hint: &getlock.Hint{DB: o.db, Log: cfg.Tuning.Logger.With("election", name),
		Election: name, Metrics: cfg.Metrics, Timeout: cfg.Tuning.QueryTimeout}}
	var last observed // state "" before the first look
	for {
		rec, err := w.look(ctx)
		if ctx.Err() != nil {
			return nil
		}
		ob := observe(rec, err)
		if ob.state == "error" {
			if probe.Permanent(err) {
				return err
			}
			cfg.Metrics.Heartbeat(name, 0, err)
		}
		changed := ob != last
		if changed {
			if serr := see(rec, err); serr != nil {
				return serr
			}
		}
		last = ob
		if !w.sleep(ctx, w.wait(rec, ob, changed), ob.state == "live" && rec.Backend == "table") {
			return nil
		}
	}
}

// watch is Observe's state, with the table backend's handover hint as a
// follower waits on it.
type watch struct {
	o    *Operator
	name string
	t    election.TuningConfig // with defaults
	hint *getlock.Hint         // nil when its preparation failed; its Lock is set after the first look
	// backoff is the last wait while nobody leads (set by every look
	// that found nobody leading: the first such look is a change).
	backoff time.Duration
}

// look is one look of Observe: the election's record. The hint is prepared
// after the first look that succeeded; if that fails Observe polls, as the
// hint only costs speed.
func (w *watch) look(ctx context.Context) (election.Record, error) {
	qctx, cancel := context.WithTimeout(ctx, w.t.QueryTimeout)
	defer cancel()
	rec, err := w.o.Status(qctx, w.name)
	if err == nil && w.hint != nil && w.hint.Lock.Name == "" {
		site, perr := getlock.ReadSite(qctx, w.o.db, w.o.table)
		if perr != nil {
			w.hint.Fail(perr)
			w.hint = nil
		} else {
			w.hint.Lock = getlock.NewLock(getlock.WakeName(site.Database, site.Table, w.name), site.Flavor)
		}
	}
	return rec, err
}

// sleep waits wait, on the handover hint when live says a table-backend
// holder keeps one; it returns false when ctx ended.
func (w *watch) sleep(ctx context.Context, wait time.Duration, live bool) bool {
	start := w.t.Clock.Now()
	if w.hint != nil && live && w.hint.Await(ctx, wait) {
		return true // the holder let go: look now
	}
	t := w.t.Clock.NewTimer(max(wait-w.t.Clock.Now().Sub(start), 0))
	select {
	case <-ctx.Done():
		t.Stop()
		return false
	case <-t.C():
		return true
	}
}

// wait returns how long Observe waits after a look: at most the jittered
// interval.
func (w *watch) wait(rec election.Record, o observed, changed bool) time.Duration {
	wait := getlock.Jitter(w.t.RetryInterval, w.t.JitterFactor)
	switch o.state {
	case "live":
		// Look again as soon as the lease may have run out.
		return min(wait, rec.LeaseLeft+getlock.MinAwait)
	case "error":
		return wait
	}
	// Released, expired or missing: a candidate usually takes a free row
	// within milliseconds (it was woken too): look again soon, then less
	// often, up to the interval while nobody leads.
	if changed {
		w.backoff = getlock.MinAwait
	}
	w.backoff = min(2*w.backoff, wait)
	return w.backoff
}

// observed is what Observe compares between two looks.
type observed struct {
	state    string // live, released, expired, missing, or error
	id       string
	term     uint64
	value    string
	priority int
	err      string
}

func observe(rec election.Record, err error) observed {
	switch {
	case errors.Is(err, election.ErrNoSuchElection):
		return observed{state: "missing"}
	case err != nil && !errors.Is(err, election.ErrNoLeader):
		return observed{state: "error", err: err.Error()}
	case rec.Live():
		return observed{state: "live", id: rec.ID, term: rec.Term, value: rec.Value, priority: rec.Priority}
	case rec.Released:
		return observed{state: "released", term: rec.Term}
	}
	return observed{state: "expired", term: rec.Term}
}
