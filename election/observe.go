package election

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ObserveOptions says where and how often Observe looks. The zero value of
// each field means its default.
type ObserveOptions struct {
	// Table is the election table. Default DefaultTable.
	Table string
	// Interval is the time between two looks. Default 2 s.
	Interval time.Duration
	// JitterFactor spreads the looks as Config.Tuning.JitterFactor does.
	// Default 0.2; negative for none.
	JitterFactor float64
	// QueryTimeout bounds each statement. Default DefaultQueryTimeout (5 s).
	QueryTimeout time.Duration
	// DisableFastHandover makes Observe poll, without waiting on the table
	// backend's handover hint (which takes a pooled connection).
	DisableFastHandover bool
	// Metrics receives the errors and skipped hints. Default nil: none.
	Metrics Metrics
}

// Observe follows an election without campaigning, as etcd's
// Election.Observe does: it writes nothing, and reports what it sees of
// the election's row to see.
//
// It follows election name in opts.Table; errors are reported to
// opts.Metrics as Heartbeat, skipped hints as HandoverSkipped.
//
// see is called on Observe's goroutine with the outcome of the first look,
// then with that of every look that differs from the one before: the live
// leader, its term, value or priority, whether the row is live, released,
// expired or missing, or the error. Its arguments are those of Status: the
// record, and nil, an error wrapping ErrNoSuchElection or ErrNoLiveLease
// (both match ErrNoLeader), or a transient database error (Observe goes on
// looking). A non-nil error from see ends Observe, which returns it.
//
// Looks are timed by the database clock as a follower's are: every
// opts.Interval, and also when the live lease runs out by the database
// clock (LeaseLeft), so that a failover is seen within a look of when it
// may happen. While nobody leads, a look that found the row free, or
// missing, is followed by looks 10 ms, 20 ms, 40 ms … later, up to
// opts.Interval, since a candidate usually takes a free row at once. With the table backend a holder keeps a handover hint
// (WakeLockName); Observe waits on it between looks, on a connection of the
// pool when the pool has one to spare, so that a clean handover (a resign,
// a transfer) is seen within milliseconds. A lock-backend election has no
// hint (waiting on the election's own lock would take it from the
// candidates), so it is seen at the next look.
//
// Observe returns nil when ctx ends, see's error, or an error that looking
// again cannot fix (ErrTableMissing, ErrAccessDenied, ErrSchemaMismatch, an
// invalid name or option). db is the caller's; Observe never closes it.
func Observe(ctx context.Context, db *sql.DB, name string, opts ObserveOptions, see func(Record, error) error) error {
	cfg, err := Config{Name: name, Table: opts.Table, Metrics: opts.Metrics, Tuning: TuningConfig{
		RetryInterval: opts.Interval, JitterFactor: opts.JitterFactor, QueryTimeout: opts.QueryTimeout,
		DisableFastHandover: opts.DisableFastHandover}}.settings()
	if err != nil {
		return err
	}
	var hint *wakeup
	if !cfg.DisableFastHandover {
		hint = newWakeup(db, cfg,
			func(err error) { cfg.Metrics.Heartbeat(cfg.Name, 0, err) },
			func() { cfg.Metrics.HandoverSkipped(cfg.Name) })
	}
	var last *observed
	backoff := minAwait // the wait after a changed look that found nobody leading
	for {
		var rec Record
		rec, hint, err = observeLook(ctx, db, cfg, hint)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, ErrNoLeader) {
			if permanent(err) {
				return err
			}
			cfg.Metrics.Heartbeat(cfg.Name, 0, err)
		}
		o := observe(rec, err)
		changed := last == nil || o != *last
		if changed {
			last = &o
			if serr := see(rec, err); serr != nil {
				return serr
			}
		}
		var wait time.Duration
		wait, backoff = observeWait(jitter(cfg.RetryInterval, cfg.JitterFactor), rec, err, o, changed, backoff)
		start := cfg.Clock.Now()
		if hint != nil && err == nil && rec.Live() && rec.Backend == "table" && wait >= minAwait {
			actx, acancel := context.WithTimeout(ctx, wait+cfg.QueryTimeout)
			woke := hint.await(actx, wait)
			acancel()
			if woke {
				continue // the holder let go: look now
			}
		}
		t := cfg.Clock.NewTimer(max(wait-cfg.Clock.Now().Sub(start), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// observeLook is one look of Observe: the election's record, and the hint
// to wait on next, prepared after the first look that succeeded (nil when
// there is none, or its preparation failed: Observe then polls, as the hint
// only costs speed).
func observeLook(ctx context.Context, db *sql.DB, cfg settings, hint *wakeup) (Record, *wakeup, error) {
	qctx, cancel := context.WithTimeout(ctx, cfg.QueryTimeout)
	defer cancel()
	rec, err := Status(qctx, db, cfg.Table, cfg.Name)
	if err == nil && hint != nil && hint.held.Lock.Name == "" {
		if perr := hint.preflight(qctx); perr != nil {
			cfg.Metrics.Heartbeat(cfg.Name, 0, perr)
			hint = nil
		}
	}
	return rec, hint, err
}

// observeWait returns how long Observe waits after a look (at most wait,
// the jittered interval) and the next backoff, the wait after a changed look
// that found nobody leading.
func observeWait(wait time.Duration, rec Record, err error, o observed, changed bool, backoff time.Duration) (time.Duration, time.Duration) {
	switch {
	case err == nil && rec.Live():
		// Look again as soon as the lease may have run out.
		return min(wait, rec.LeaseLeft+minAwait), minAwait
	case o.state == "released" || o.state == "expired" || o.state == "missing":
		// A candidate usually takes a free row within milliseconds (it was
		// woken too): look again soon, then less often, up to the interval
		// while nobody leads.
		if changed {
			backoff = minAwait
		}
		backoff = min(2*backoff, wait)
		return backoff, backoff
	}
	return wait, backoff
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

func observe(rec Record, err error) observed {
	switch {
	case errors.Is(err, ErrNoSuchElection):
		return observed{state: "missing"}
	case err != nil && !errors.Is(err, ErrNoLeader):
		return observed{state: "error", err: err.Error()}
	case rec.Live():
		return observed{state: "live", id: rec.ID, term: rec.Term, value: rec.Value, priority: rec.Priority}
	case rec.Released:
		return observed{state: "released", term: rec.Term}
	}
	return observed{state: "expired", term: rec.Term}
}
