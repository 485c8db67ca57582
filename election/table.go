package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// NewTable returns a candidate of the table backend: the election is the row
// of cfg.Table whose anchor is cfg.Name, kept by an INSERT … ON DUPLICATE
// KEY UPDATE heartbeat whose affected rows tell the candidate it holds it.
// See the package documentation for the algorithm.
//
// db is the caller's: the library never opens or closes it, and uses one of
// its connections per statement. cfg is copied, defaults filled in and
// validated; errors wrap ErrInvalidConfig. NewTable does no I/O: Run checks
// the table first.
func NewTable(db *sql.DB, cfg Config) (Election, error) {
	if db == nil {
		return nil, ErrNilDB
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &tableBackend{db: sqlx.NewDb(db, "mysql"), cfg: cfg}
	t.prepareSQL()
	c := newCandidate(cfg, t)
	c.db = db
	if !cfg.DisableFastHandover {
		t.wake = newWakeup(db, cfg, func(err error) { c.metrics().heartbeat(cfg.Name, 0, err) },
			func() { c.metrics().handoverSkipped(cfg.Name) })
	}
	return c, nil
}

type tableBackend struct {
	db   *sqlx.DB
	cfg  Config
	wake *wakeup // nil with Config.DisableFastHandover
	// bound limits the statements' server-side lock waits; set by
	// preflight, which then prepares the statements again.
	bound atomicBound

	heartbeatSQL, checkSQL, releaseSQL, handOffSQL, peekSQL string
}

// expiredSQL is true when the row's lease has run out by the database clock.
const expiredSQL = `(last_seen_active + INTERVAL lease_ms * 1000 MICROSECOND <= NOW(6))`

// termSQL is a new term: the database clock in microseconds, and never less
// than the previous term plus one.
const termNowSQL = `FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000)`

// prepareSQL builds the statements once.
//
// The heartbeat is one INSERT … ON DUPLICATE KEY UPDATE. With ?me the
// candidate and ?hold the term it holds (0 when it holds none):
//
//	R (renew)  = service_id = ?me AND term = ?hold AND released = 0
//	T (take)   = NOT R AND (released <> 0 OR expired OR service_id = ?me)
//	C (change) = R OR T
//
// Every SET expression is written so that the result is the same whether the
// server assigns left to right (MySQL) or simultaneously (MariaDB's
// SIMULTANEOUS_ASSIGNMENT): columns read by a condition are assigned after
// it, or their new values leave the condition unchanged (once service_id is
// ?me and the term is new, T stays true; when C is false nothing changes).
// Affected rows: 1 for an insert, 2 for a change, 0 (or 1 with
// CLIENT_FOUND_ROWS) for no change; LAST_INSERT_ID(term) returns the row's
// term in the same round trip. An ambiguous 1 and every change of term are
// confirmed by reading the row, so a DSN with clientFoundRows=true cannot
// produce a false leader.
//
// Every statement that can wait for a lock is wrapped by t.bound (a no-op
// until preflight detected the server).
func (t *tableBackend) prepareSQL() {
	tbl, bound := quoteTable(t.cfg.Table), t.bound.load()
	const r = `(service_id = ? AND term = ? AND released = 0)`
	take := `(NOT ` + r + ` AND (released <> 0 OR ` + expiredSQL + ` OR service_id = ?))`
	change := `(` + r + ` OR ` + take + `)`
	t.heartbeatSQL = bound.wrap(`INSERT INTO ` + tbl + ` (anchor, service_id, last_seen_active, term, term_started_at,
  lease_ms, released, acquired, value, backend, connection_id)
VALUES (?, ?, NOW(6), LAST_INSERT_ID(` + termNowSQL + `), NOW(6), ?, 0, 'insert', ?, 'table', NULL)
ON DUPLICATE KEY UPDATE
  acquired = IF(` + take + `, IF(released <> 0, 'released', IF(` + expiredSQL + `, 'expired', 'claimed')), acquired),
  term_started_at = IF(` + take + `, NOW(6), term_started_at),
  term = LAST_INSERT_ID(IF(` + take + `, GREATEST(term + 1, ` + termNowSQL + `), term)),
  value = IF(` + change + `, ?, value),
  backend = IF(` + change + `, 'table', backend),
  connection_id = IF(` + change + `, NULL, connection_id),
  service_id = IF(` + change + `, ?, service_id),
  released = IF(` + change + `, 0, released),
  lease_ms = IF(` + change + `, ?, lease_ms),
  last_seen_active = IF(` + change + `, NOW(6), last_seen_active)`)
	t.checkSQL = bound.wrap(`SELECT term, acquired FROM ` + tbl + ` WHERE anchor = ? AND service_id = ? AND released = 0`)
	t.releaseSQL = bound.wrap(`UPDATE ` + tbl + ` SET released = 1 WHERE anchor = ? AND service_id = ? AND term = ? AND released = 0`)
	t.handOffSQL = bound.wrap(`UPDATE ` + tbl + ` SET ` + handOffSet + ` WHERE anchor = ? AND service_id = ? AND term = ? AND released = 0`)
	t.peekSQL = `SELECT ` + recordColumns + ` FROM ` + tbl + ` WHERE 1 = 0`
}

// heartbeatArgs lays out the arguments of heartbeatSQL in order.
func (t *tableBackend) heartbeatArgs(hold uint64) []any {
	me, lease, val := t.cfg.ID, t.cfg.leaseMillis(), t.cfg.Value
	rArgs := []any{me, hold}
	takeArgs := append(append([]any{}, rArgs...), me)
	changeArgs := append(append([]any{}, rArgs...), takeArgs...)
	args := []any{t.cfg.Name, me, lease, val}
	args = append(args, takeArgs...) // acquired
	args = append(args, takeArgs...) // term_started_at
	args = append(args, takeArgs...) // term
	args = append(args, changeArgs...)
	args = append(args, val) // value
	args = append(args, changeArgs...)
	args = append(args, changeArgs...)
	args = append(args, changeArgs...)
	args = append(args, me) // service_id
	args = append(args, changeArgs...)
	args = append(args, changeArgs...)
	args = append(args, lease) // lease_ms
	args = append(args, changeArgs...)
	return args
}

func (t *tableBackend) preflight(ctx context.Context) error {
	if _, err := t.db.ExecContext(ctx, t.peekSQL); err != nil {
		return explainLayout(ctx, t.db.DB, t.cfg.Table, classify(err, t.cfg.Table))
	}
	if err := checkTimeZone(ctx, t.db.DB); err != nil {
		return err
	}
	bound, err := detectBound(ctx, t.db, t.cfg.QueryTimeout)
	if err != nil {
		return err
	}
	t.bound.store(bound)
	t.prepareSQL()
	if t.wake != nil {
		return t.wake.preflight(ctx)
	}
	return nil
}

// checkTimeZone fails when the session time zone has daylight saving time:
// NOW() would jump by an hour and leases with it. A zone without DST gives
// the same offset in January and July.
func checkTimeZone(ctx context.Context, db *sql.DB) error {
	var diff sql.NullInt64
	err := db.QueryRowContext(ctx,
		`SELECT UNIX_TIMESTAMP('2030-07-15 12:00:00') - UNIX_TIMESTAMP('2030-01-15 12:00:00')`).Scan(&diff)
	if err != nil {
		return fmt.Errorf("election: checking the session time zone: %w", err)
	}
	if const181Days := int64(181 * 24 * 3600); !diff.Valid || diff.Int64 != const181Days {
		var tz string
		_ = db.QueryRowContext(ctx, `SELECT @@session.time_zone`).Scan(&tz)
		return fmt.Errorf("%w (session time_zone is %q)", ErrUnsafeTimeZone, tz)
	}
	return nil
}

func (t *tableBackend) follow(ctx context.Context) (Record, beat, time.Duration, error) {
	var rec Record
	var err error
	if t.cfg.Batcher != nil {
		rec, _, err = t.cfg.Batcher.read(ctx, t.cfg.Name)
	} else {
		rec, err = readRecord(ctx, t.db, t.cfg.Table, t.cfg.Name)
	}
	if err != nil && !errors.Is(err, ErrNoLeader) {
		return Record{}, beat{}, 0, err
	}
	if rec.Live() && rec.ID != t.cfg.ID {
		// Someone else holds a live lease: look again at the retry
		// interval, or just after the lease runs out by the database clock.
		wait := jitter(t.cfg.RetryInterval, t.cfg.JitterFactor)
		return rec, beat{}, min(wait, rec.LeaseLeft+time.Millisecond), nil
	}
	b, err := t.heartbeat(ctx, 0)
	return rec, b, 0, err
}

func (t *tableBackend) renew(ctx context.Context, hold uint64) (beat, error) {
	if t.cfg.Batcher != nil {
		renewed, err := t.cfg.Batcher.renew(ctx, t.cfg.Name, t.cfg.ID, hold)
		if err != nil {
			return beat{}, err
		}
		if renewed {
			return beat{held: true, term: hold}, nil
		}
		// Locked by someone else, or no longer ours as we knew it: decide
		// with the election's own heartbeat.
	}
	return t.heartbeat(ctx, hold)
}

// await implements waker.
func (t *tableBackend) await(ctx context.Context, d time.Duration) bool {
	return t.wake != nil && t.wake.await(ctx, d)
}

// awaits implements waker.
func (t *tableBackend) awaits() bool { return t.wake != nil }

// lost implements holdLoser: the hold ended without a release.
func (t *tableBackend) lost(ctx context.Context, _ uint64) {
	if t.wake != nil {
		t.wake.letGo(ctx)
	}
}

func (t *tableBackend) heartbeat(ctx context.Context, hold uint64) (beat, error) {
	b, err := t.heartbeatOnce(ctx, hold)
	if err == nil && b.held && t.wake != nil {
		t.wake.hold(ctx)
	}
	return b, err
}

func (t *tableBackend) heartbeatOnce(ctx context.Context, hold uint64) (beat, error) {
	res, err := t.db.ExecContext(ctx, t.heartbeatSQL, t.heartbeatArgs(hold)...)
	if err != nil {
		return beat{}, classify(err, t.cfg.Table)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return beat{}, err
	}
	term, _ := res.LastInsertId()
	if n == 0 || n > 2 {
		return beat{}, nil
	}
	if n == 2 && hold != 0 && uint64(term) == hold {
		return beat{held: true, term: hold}, nil // renewed
	}
	// A new term, or an ambiguous 1 (an insert, or no change under
	// CLIENT_FOUND_ROWS): read what the row says now.
	var row struct {
		Term     uint64 `db:"term"`
		Acquired string `db:"acquired"`
	}
	err = t.db.GetContext(ctx, &row, t.checkSQL, t.cfg.Name, t.cfg.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return beat{}, nil
	}
	if err != nil {
		return beat{}, classify(err, t.cfg.Table)
	}
	if term > 0 && row.Term != uint64(term) {
		return beat{}, nil // changed again since: not ours this tick
	}
	switch {
	case n == 2 && hold != 0 && row.Term == hold:
		return beat{held: true, term: hold}, nil
	case n == 1 && row.Acquired == "insert":
		return beat{held: true, term: row.Term, inserted: true, delay: t.cfg.LockDelay}, nil
	case n == 2 && (row.Acquired == "expired" || row.Acquired == "released"):
		return beat{held: true, term: row.Term}, nil // won: no delay needed
	case n == 2:
		return beat{held: true, term: row.Term, delay: t.cfg.LockDelay}, nil // claimed
	}
	return beat{}, nil // CLIENT_FOUND_ROWS: 1 meant "no change"
}

// handOffSet gives a held row up without marking it released: it expires
// the given number of milliseconds from now by the database clock, so that
// the next holder takes an expired row after the lock delay the releaser had
// not served (see candidate.releaseHold).
const handOffSet = `last_seen_active = NOW(6), lease_ms = ?`

func (t *tableBackend) release(ctx context.Context, hold uint64, unserved time.Duration) error {
	var err error
	if unserved > 0 {
		_, err = t.db.ExecContext(ctx, t.handOffSQL, ceilMillis(unserved), t.cfg.Name, t.cfg.ID, hold)
	} else {
		_, err = t.db.ExecContext(ctx, t.releaseSQL, t.cfg.Name, t.cfg.ID, hold)
	}
	if t.wake != nil {
		t.wake.letGo(ctx) // after the row says released: woken followers take it
	}
	return classify(err, t.cfg.Table)
}

func (t *tableBackend) leader(ctx context.Context) (Record, error) {
	return readRecord(ctx, t.db, t.cfg.Table, t.cfg.Name)
}

func (t *tableBackend) close() {
	if t.wake != nil {
		t.wake.close()
	}
}
