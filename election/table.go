package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/stmt"
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
func NewTable(db *sql.DB, config Config) (*Candidate, error) {
	if db == nil {
		return nil, ErrNilDB
	}
	cfg, err := config.settings()
	if err != nil {
		return nil, err
	}
	t := &tableBackend{db: sqlx.NewDb(db, "mysql"), cfg: cfg, value: cfg.Value}
	t.prepareSQL()
	c := newCandidate(cfg, t)
	c.db = db
	if !cfg.DisableFastHandover {
		t.wake = newWakeup(db, cfg, func(err error) { c.metrics().Heartbeat(cfg.Name, 0, err) },
			func() { c.metrics().HandoverSkipped(cfg.Name) })
	}
	return c, nil
}

type tableBackend struct {
	db   *sqlx.DB
	cfg  settings
	wake *wakeup // nil with Config.Tuning.DisableFastHandover
	// value is the value the candidate publishes: cfg.Value until
	// Proclaim changes it (see setValue).
	value string
	// bound limits the statements' server-side lock waits; set by
	// preflight, which then prepares the statements again.
	bound stmt.AtomicBound
	// adopt is the adopted lease in milliseconds during an adoption
	// period (see adoptedMillis), 0 outside one; set by preflight.
	adopt int64

	stmts tableStmts
}

// tableStmts are the table backend's statements, compiled by prepareSQL;
// they take their arguments from tableBackend.params.
type tableStmts struct {
	heartbeat, renew, check                      stmt.Stmt
	release, handOff, handOver, proclaim, prefer rowStmt
	peek                                         string
	floor                                        floor.Stmts
}

// The database clock, and the session state sqlelect did not set.
//
// The caller owns the pool, and its own code may leave session state on a
// connection that a candidate's statement then runs on: SET @@timestamp
// moves NOW(6) (which is then the set value, not the statement's start), and
// a time_zone with daylight saving time makes local times jump by an hour,
// so that TIMESTAMP arithmetic and conversions across a change are off by
// that hour. sqlelect does not trust session state it did not set:
//
//   - Every time a statement on the caller's pool writes or judges (a
//     lease's start, a term, whether a lease ran out or is still live) is
//     clockSQL, SYSDATE(6): the server's clock when it is evaluated, which
//     no session can set. No time is NOW(6). The heartbeat judges expiry
//     once (its decision), so that one reading decides for the whole
//     statement.
//   - Every such statement also checks trustedSQL: that the session's time
//     zone has no daylight saving time, and that SYSDATE(6) is not NOW(6),
//     which it is on a server run with --sysdate-is-now (then a session's
//     SET @@timestamp moves it). Otherwise it changes nothing: the
//     heartbeat fails (see unsafeSessionSQL), the others match no row. Run
//     checks both at preflight; the statement checks them again, since the
//     server a pool reaches may change (a failover) while Run goes on.
//   - The lock backend's connection is sqlelect's own: it sets the session's
//     clock and time zone when it takes the connection (lockBackend.prepare).

// Whether a statement commits (issue 31, item 3). A session with
// autocommit=0, or one left in the transaction that COMMIT AND CHAIN opens
// (completion_type=CHAIN), keeps a statement's change uncommitted: a renewal
// reported as 1 affected row would not be seen by anyone else, and its
// rollback (the connection recycled, or killed by a DBA) exposes an expired
// row while the leader still believes. sqlelect does not trust the session's
// commit mode either:
//
//   - Every take, and every heartbeat, runs in a transaction the library
//     begins and ends with COMMIT AND NO CHAIN
//     (floor.InConnTx): BEGIN ends whatever transaction the session had open, and
//     the COMMIT commits whatever the session's autocommit and
//     completion_type. Or on the lock backend's own connection, whose
//     session sets autocommit and completion_type itself.
//   - The statements the table backend runs on a pooled connection outside
//     a transaction (the renewal, release, hand-off, hand-over, proclaim,
//     prefer) check commitsSQL and change nothing otherwise (a constant
//     condition: no row is read or locked). A renewal refused so falls back
//     to the heartbeat, in its transaction.
//   - Run refuses a session that does not commit each statement
//     (checkCommits, ErrNoAutocommit): set in the DSN, it would be on every
//     connection.

// commitsSQL is true when a statement the session runs outside a
// transaction commits when it ends: autocommit is on, and no COMMIT AND
// CHAIN (completion_type=CHAIN) may have left a transaction open.
const commitsSQL = `@@autocommit AND @@completion_type<>'CHAIN'`

// clockSQL is the database clock (dbclock.Now).
const clockSQL = dbclock.Now

// trustedSQL trusts the session's clock (dbclock.Trusted); checkTimeZone
// and checkSysdate check the same in Run's preflight.
const trustedSQL = dbclock.Trusted

// dstProbeSQL is dbclock.DSTProbe, which checkTimeZone uses too.
const dstProbeSQL = dbclock.DSTProbe

// unsafeSessionSQL is the heartbeat's anchor: :name while trustedSQL holds,
// else NULL, which no INSERT may write into the primary key: the statement
// then fails with error 1048 (ER_BAD_NULL_ERROR, whatever the sql_mode: a
// single-row INSERT) before it looks at the row, and changes nothing (see
// errUnsafeSession). The VALUES list is evaluated once, so the check is
// made once per statement.
const unsafeSessionSQL = `IF(` + trustedSQL + `,:name,NULL)`

// expiredSQL is true when the row's lease has run out by the database
// clock (clockSQL). The heartbeat evaluates it once, in its decision.
const expiredSQL = `last_seen_active+INTERVAL lease_ms*1000 MICROSECOND<=` + clockSQL

// liveSQL is true while the row's lease is live (dbclock.Live).
const liveSQL = dbclock.Live

// termNowSQL is the database clock in microseconds (dbclock.TermNow).
const termNowSQL = dbclock.TermNow

// termNewSQL is a new term above the floor :floor (dbclock.TermNew).
const termNewSQL = dbclock.TermNew

// holdsCond is true while the row names the candidate (:me) with the term it
// holds (:hold), not released.
const holdsCond = `service_id=:me AND term=:hold AND released=0`

// heldCond matches election :name's row while the candidate holds it, on a
// session whose time zone has no daylight saving time (see trustedSQL).
const heldCond = `anchor = :name AND ` + holdsCond + ` AND ` + trustedSQL

// The heartbeat's conditions (see heartbeatSQL), with :me the candidate and
// :hold the term it holds (0 when it holds none).
const (
	// renewCond (R): the row is the candidate's, with the term it holds,
	// and no transfer or step-down is asked of it (a transfer to itself
	// asks nothing: the renewal clears it).
	renewCond = holdsCond + ` AND IFNULL(transfer_to=:me,1)`
	// decideSQL is the heartbeat's decision on the row as it stands,
	// evaluated once (see heartbeatSQL): 'renewed' (R); how a take
	// acquires the row ('expired', 'claimed', 'released', 'transferred');
	// or NULL, no change. A released row is reserved while its lease (the
	// transfer window) runs, for transfer_to unless that is empty; a row
	// that names the candidate but carries a request (an operator asked
	// its holder to hand over) is not claimed: it is left to its holder,
	// or to expire.
	decideSQL = `CASE
WHEN ` + renewCond + ` THEN 'renewed'
WHEN released AND transfer_to=:me THEN 'transferred'
WHEN ` + expiredSQL + ` THEN IF(released,'released','expired')
WHEN released=0 THEN IF(service_id=:me AND transfer_to IS NULL,'claimed',NULL)
WHEN IFNULL(transfer_to='',1) THEN 'released'
END`
)

// heartbeatSQL is the heartbeat on table tbl (quoted): one INSERT … ON
// DUPLICATE KEY UPDATE. With :me the candidate and :hold the term it holds
// (0 when it holds none), it inserts a missing row, and otherwise decides
// once and applies the decision:
//
//	decision = CASE
//	WHEN service_id = :me AND term = :hold AND released = 0
//	     AND IFNULL(transfer_to = :me, 1)                 THEN 'renewed'
//	     (no transfer asked, or one to :me)
//	WHEN released <> 0 AND transfer_to = :me               THEN 'transferred'
//	WHEN expired (by SYSDATE(6)) THEN IF(released = 0, 'expired', 'released')
//	WHEN released = 0 THEN IF(service_id = :me AND transfer_to IS NULL, 'claimed', NULL)
//	WHEN IFNULL(transfer_to = '', 1)                       THEN 'released'
//	     (released with no transfer, or with an empty one)
//	END   (else NULL: released, reserved for another while its lease runs)
//	a take (decision > 1, after 'renewed' in the ENUM): acquired = decision,
//	    term_started_at, a new term
//	any decision (IF(decision, …)): service_id = :me, released = 0, a new
//	    lease, the value and priority, transfer_to = NULL, …
//	decision = NULL
//
// The first assignment is the only one whose place matters: every other
// reads only the decision and its own column, and the last puts the
// decision back to NULL (a CHECK constraint keeps it NULL outside this
// statement, so that no stale value is read as a decision). That needs the
// SET list assigned left to right, as MySQL does and MariaDB does unless
// its sql_mode has SIMULTANEOUS_ASSIGNMENT: there, the statement fails on
// the constraint and changes nothing, and Run refuses such a session
// (checkAssignmentOrder). A leader asked to hand over (transfer_to set on
// its live row) is neither renewed nor takes, so its renewal changes
// nothing; it then reads the row and acts on the request (see
// candidate.handOver). Every
// change clears transfer_to and writes the candidate's priority
// (Config.Preference.Priority).
//
// The statement runs in one transaction with the election's term floor
// (floor.InTx): :floor is the floor, and :insert is 'first' when the
// election has no floor row, it never existed (an insert then leads
// without the lock delay), else 'insert'. Every term it writes is above :floor.
// Affected rows: 1 for an insert, 2 for a change, 0 (or 1 with
// CLIENT_FOUND_ROWS) for no change; LAST_INSERT_ID(term) returns the row's
// term in the same round trip. An ambiguous 1 and every change of term are
// confirmed by reading the row, so a DSN with clientFoundRows=true cannot
// produce a false leader.
func heartbeatSQL(tbl string) string {
	cols, values := insertColumns([]column{
		{"anchor", unsafeSessionSQL},
		{"service_id", ":me"},
		{"term", "LAST_INSERT_ID(" + termNewSQL + ")"},
		{"term_started_at", clockSQL},
		// After term_started_at: SYSDATE(6) is read at each call, and a
		// row whose last renewal came before its term began would say so
		// (a first election leads before it renews).
		{"last_seen_active", clockSQL},
		{"lease_ms", ":lease"},
		{"acquired", ":insert"},
		{"value", ":value"},
		{"priority", ":priority"},
		// released, backend, connection_id, transfer_to and decision keep
		// their defaults: 0, 'table', NULL, NULL, NULL.
	})
	// took is a take's decision; every other reads the decision as a
	// number: NULL, no change, or its place in the ENUM (1 is 'renewed').
	const took = `decision>1`
	return `INSERT INTO ` + tbl + `(` + cols + `)
VALUES(` + values + `)
ON DUPLICATE KEY UPDATE
decision=` + decideSQL + `,
acquired=IF(` + took + `,decision,acquired),
term_started_at=IF(` + took + `,` + clockSQL + `,term_started_at),
term=LAST_INSERT_ID(IF(` + took + `,GREATEST(term+1,` + termNowSQL + `,:floor+1),term)),
service_id=IF(decision,:me,service_id),
value=IF(decision,:value,value),
backend=IF(decision,'table',backend),
connection_id=IF(decision,NULL,connection_id),
transfer_to=IF(decision,NULL,transfer_to),
released=IF(decision,0,released),
lease_ms=IF(decision,:lease,lease_ms),
last_seen_active=IF(decision,` + clockSQL + `,last_seen_active),
priority=IF(decision,:priority,priority),
decision=NULL`
}

// renewSQL is a holder's renewal on table tbl (quoted): the heartbeat's R
// branch alone, as an UPDATE that assigns no term, so that it runs outside
// the term floor's transaction, in one round trip. It changes the row (1
// affected row, or matched under CLIENT_FOUND_ROWS) exactly when the
// heartbeat would renew it (renewCond, on a session whose time zone has no
// daylight saving time), with the same assignments; otherwise it changes
// nothing and the heartbeat decides (a take, a request, an unsafe session,
// …).
func renewSQL(tbl string) string {
	return `UPDATE ` + tbl + ` SET value = :value, backend = 'table', connection_id = NULL, transfer_to = NULL,
  released = 0, lease_ms = :lease, last_seen_active = ` + clockSQL + `, priority = :priority
WHERE anchor = :name AND ` + renewCond + ` AND ` + trustedSQL + ` AND ` + commitsSQL
}

// prepareSQL builds the statements: once by NewTable, and again by
// preflight once it detected the server. Every statement that can wait for a
// lock is wrapped by t.bound (a no-op until then).
func (t *tableBackend) prepareSQL() {
	tbl, bound := quoteTable(t.cfg.Table), t.bound.Load()
	held := heldRowStatements(tbl)
	t.stmts = tableStmts{
		heartbeat: bound.Stmt(heartbeatSQL(tbl)),
		renew:     bound.Stmt(renewSQL(tbl)),
		check:     bound.Stmt(`SELECT term, acquired, transfer_to FROM ` + tbl + ` WHERE anchor = :name AND service_id = :me AND released = 0`),
		release:   newRowStmt(held.release, bound, bound),
		handOff:   newRowStmt(held.handOff, bound, bound),
		handOver:  newRowStmt(held.handOver, bound, bound),
		proclaim:  newRowStmt(held.proclaim, bound, bound),
		prefer:    newRowStmt(held.prefer, bound, bound),
		peek:      `SELECT ` + recordColumns + `, decision FROM ` + tbl + ` WHERE 1 = 0`, // decision: schema version 7
		floor:     newFloorStmts(t.cfg.Table, bound, t.cfg.LockDelay),
	}
}

// heldRowSQL are the statements a holder of either backend runs on its
// election's row of table tbl (quoted), on a session whose clock is trusted
// (heldCond): release marks it released; handOff leaves it to expire in
// :lease (an unserved lock delay); handOver marks it released and reserved
// for :to for :lease; proclaim writes :value; prefer asks the leader of
// term :term to hand over (see preferSQL).
type heldRowSQL struct{ release, handOff, handOver, proclaim, prefer string }

// heldRowStatements returns the heldRowSQL of table tbl (quoted).
func heldRowStatements(tbl string) heldRowSQL {
	return heldRowSQL{
		release:  `UPDATE ` + tbl + ` SET released = 1, transfer_to = NULL WHERE ` + heldCond,
		handOff:  `UPDATE ` + tbl + ` SET ` + handOffSets + ` WHERE ` + heldCond,
		handOver: `UPDATE ` + tbl + ` SET ` + handOverSets + ` WHERE ` + heldCond,
		proclaim: `UPDATE ` + tbl + ` SET value = :value WHERE ` + heldCond,
		prefer:   preferSQL(tbl),
	}
}

// params are the values of the statements' parameters for this candidate
// holding term hold (0 for none).
func (t *tableBackend) params(hold uint64) stmt.Params {
	return stmt.Params{Name: t.cfg.Name, Me: t.cfg.ID, Hold: hold, Lease: max(t.cfg.leaseMillis(), t.adopt), Value: t.value,
		Priority: t.cfg.Priority}
}

// exec runs s with p.
func (t *tableBackend) exec(ctx context.Context, s stmt.Stmt, p stmt.Params) (sql.Result, error) {
	query, args := s.Bind(p)
	return t.db.ExecContext(ctx, query, args...)
}

func (t *tableBackend) preflight(ctx context.Context) error {
	if _, err := t.db.ExecContext(ctx, t.stmts.peek); err != nil {
		return explainLayout(ctx, t.db.DB, t.cfg.Table, classify(err, t.cfg.Table))
	}
	if err := checkPrivileges(ctx, t.db.DB, quoteTable(t.cfg.Table)); err != nil {
		return err
	}
	if err := runPreflight(ctx, t.db.DB, t.cfg.Table, backendTable); err != nil {
		return err
	}
	if b := t.cfg.Batcher; b == nil || !b.serverProbed.Load() {
		probed, err := preflightServer(ctx, t.db.DB, t.cfg.Table)
		if err != nil {
			return err
		}
		if b != nil && probed {
			b.serverProbed.Store(true) // once for its thousands of elections
		}
	}
	adopt, err := adoptedMillis(ctx, t.db.DB, t.cfg)
	if err != nil {
		return err
	}
	t.adopt = adopt
	bound, err := stmt.DetectBound(ctx, t.db, t.cfg.QueryTimeout)
	if err != nil {
		return err
	}
	t.bound.Store(bound)
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
	err := db.QueryRowContext(ctx, `SELECT `+dstProbeSQL).Scan(&diff)
	if err != nil {
		return fmt.Errorf("election: checking the session time zone: %w", err)
	}
	if const181Days := int64(181 * 24 * 3600); !diff.Valid || diff.Int64 != const181Days {
		tz, _, _ := stmt.ServerVariable(ctx, db, "session.time_zone")
		return fmt.Errorf("%w (session time_zone is %q)", ErrUnsafeTimeZone, tz)
	}
	return nil
}

// checkCommits fails with ErrNoAutocommit when the session does not
// commit each statement (see commitsSQL): the statements on the pool that
// check it would all be refused.
func checkCommits(ctx context.Context, db *sql.DB) error {
	var autocommit, completion string
	if err := db.QueryRowContext(ctx, `SELECT @@autocommit, @@completion_type`).Scan(&autocommit, &completion); err != nil {
		return fmt.Errorf("election: reading the session's autocommit: %w", err)
	}
	if autocommit != "1" || strings.EqualFold(completion, "CHAIN") || completion == "1" {
		return fmt.Errorf("%w (session autocommit is %s, completion_type %s): remove them from the DSN, "+
			"and reset them before a connection goes back to the pool", ErrNoAutocommit, autocommit, completion)
	}
	return nil
}

// checkAssignmentOrder fails with ErrSimultaneousAssignment when the
// session's sql_mode has MariaDB's SIMULTANEOUS_ASSIGNMENT: the heartbeat
// reads its decision after assigning it (see heartbeatSQL), so under that
// mode it changes no existing row (it stays safe, but the candidate would
// never take over).
func checkAssignmentOrder(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, `SELECT @@SESSION.sql_mode`).Scan(&mode); err != nil {
		return fmt.Errorf("election: reading the session's sql_mode: %w", err)
	}
	if strings.Contains(strings.ToUpper(mode), "SIMULTANEOUS_ASSIGNMENT") {
		return fmt.Errorf("%w (session sql_mode is %q)", ErrSimultaneousAssignment, mode)
	}
	return nil
}

// checkSysdate fails with ErrSysdateIsNow when SYSDATE() is not the server's
// clock at each call (--sysdate-is-now makes it NOW(), the statement's
// start, which a session can set): two calls a millisecond apart return the
// same time.
func checkSysdate(ctx context.Context, db *sql.DB) error {
	var a, b string
	var slept int
	err := db.QueryRowContext(ctx, `SELECT CAST(SYSDATE(6) AS CHAR), SLEEP(0.002), CAST(SYSDATE(6) AS CHAR)`).Scan(&a, &slept, &b)
	if err != nil {
		return fmt.Errorf("election: checking the server's clock: %w", err)
	}
	if a >= b { // one format: the text orders as the time
		return fmt.Errorf("%w (SYSDATE(6) was %s before and after a 2 ms sleep)", ErrSysdateIsNow, a)
	}
	return nil
}

func (t *tableBackend) follow(ctx context.Context) (Record, beat, time.Duration, error) {
	var rec Record
	var err error
	if t.cfg.Batcher != nil {
		rec, _, err = t.cfg.Batcher.read(ctx, t.cfg.Name)
	} else {
		rec, err = ReadRecord(ctx, t.db.DB, t.cfg.Table, t.cfg.Name)
	}
	if err != nil && !errors.Is(err, ErrNoLeader) {
		return Record{}, beat{}, 0, err
	}
	if rec.Live() && (rec.ID != t.cfg.ID || rec.Transfer) || rec.reservedFor(t.cfg.ID) {
		// Someone else holds a live lease, or the row was handed to
		// another candidate, or a live row names this candidate (which
		// holds nothing) with a planned change pending, which it may not
		// claim: look again at the retry interval, or just after the
		// lease (the transfer window) runs out by the database clock.
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

// beat runs the heartbeat statement for term hold in one transaction with
// the election's term floor (floor.InTx), and returns its affected rows and
// LAST_INSERT_ID: the row's term (an insert's new one).
func (t *tableBackend) beat(ctx context.Context, hold uint64) (n, term int64, err error) {
	err = floor.InTx(ctx, t.db.DB, t.stmts.floor, t.cfg.Name, func(tx floor.Tx, floor uint64, first bool) (uint64, error) {
		p := t.params(hold)
		// During an adoption period a recipe node may have created and
		// led the election without a floor row: no insert is a first.
		p.Floor, p.First = floor, first && t.adopt == 0
		query, args := t.stmts.heartbeat.Bind(p)
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		if n, err = res.RowsAffected(); err != nil {
			return 0, err
		}
		term, _ = res.LastInsertId()
		// The row's term, new or not: a row no candidate of this
		// version wrote (an earlier version's) gets its floor too.
		return uint64(max(term, 0)), nil
	})
	return n, term, err
}

func (t *tableBackend) heartbeatOnce(ctx context.Context, hold uint64) (beat, error) {
	if hold != 0 {
		// A holder's renewal first, in one statement; the heartbeat,
		// in its transaction, only when that renews nothing.
		res, err := t.exec(ctx, t.stmts.renew, t.params(hold))
		if err != nil {
			return beat{}, classify(err, t.cfg.Table)
		}
		if n, err := res.RowsAffected(); err != nil {
			return beat{}, err
		} else if n == 1 {
			return beat{held: true, term: hold}, nil // renewed
		}
	}
	n, term, err := t.beat(ctx, hold)
	if err != nil {
		if err = unsafeSession(err); errors.Is(err, ErrUnsafeSession) {
			// Refused (trustedSQL): a time zone with daylight saving time
			// left on this connection, or a server that now runs with
			// --sysdate-is-now (a failover to one), which stops Run.
			if serr := checkSysdate(ctx, t.db.DB); errors.Is(serr, ErrSysdateIsNow) {
				err = serr
			}
		}
		return beat{}, classify(err, t.cfg.Table)
	}
	if n > 2 || n == 0 && hold == 0 {
		return beat{}, nil
	}
	// A new term, an ambiguous 1 (an insert, or no change under
	// CLIENT_FOUND_ROWS), a holder's renewal that changed nothing (deposed,
	// or asked to hand over), or one the heartbeat made after renewSQL
	// renewed nothing (2 affected rows and the same term: rare, and what a
	// value left in the decision column by another statement would also
	// report): read what the row says now.
	var row struct {
		Term       uint64         `db:"term"`
		Acquired   string         `db:"acquired"`
		TransferTo sql.NullString `db:"transfer_to"`
	}
	query, args := t.stmts.check.Bind(t.params(hold))
	err = t.db.GetContext(ctx, &row, query, args...)
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
	case n < 2 && hold != 0 && row.Term == hold && row.TransferTo.Valid:
		// Still ours, not renewed: an operator asked for a transfer or a
		// step-down (see renewCond).
		return beat{requested: true, to: row.TransferTo.String}, nil
	case n == 0:
		return beat{}, nil // deposed
	case n == 2 && hold != 0 && row.Term == hold:
		return beat{held: true, term: hold}, nil
	case n == 1 && row.Acquired == "first":
		// The election's first term: nobody held it before, so nobody
		// may still believe it leads.
		return beat{held: true, term: row.Term, inserted: true}, nil
	case n == 1 && row.Acquired == "insert":
		return beat{held: true, term: row.Term, inserted: true, delay: t.cfg.LockDelay}, nil
	case n == 2 && (row.Acquired == "expired" || row.Acquired == "released" || row.Acquired == "transferred"):
		return beat{held: true, term: row.Term}, nil // won: no delay needed
	case n == 2:
		return beat{held: true, term: row.Term, delay: t.cfg.LockDelay}, nil // claimed
	}
	return beat{}, nil // CLIENT_FOUND_ROWS: 1 meant "no change"
}

// handOffSets gives a held row up without marking it released: it expires
// the given number of milliseconds from now by the database clock, so that
// the next holder takes an expired row after the lock delay the releaser had
// not served (see candidate.releaseHold). Releases drop a pending planned
// change (transfer_to): the releaser will not act on it, and a row left
// reserved would make the target, or nobody, wait a whole lease.
const handOffSets = `last_seen_active = ` + clockSQL + `, lease_ms = :lease, transfer_to = NULL`

// handOverSets gives a held row up for a planned change of leader: marked
// released, and reserved for :to (for anyone when it is empty) until the
// row's lease, :lease milliseconds from now by the database clock (the
// transfer window), runs out. See reservedCond.
const handOverSets = `released = 1, transfer_to = NULLIF(:to, ''), last_seen_active = ` + clockSQL + `, lease_ms = :lease`

func (t *tableBackend) release(ctx context.Context, hold uint64, unserved time.Duration) error {
	s, p := t.stmts.release, t.params(hold)
	if unserved > 0 {
		// During an adoption period, never less than the adopted lease:
		// a recipe node that takes the row over keeps its lease_ms.
		s, p.Lease = t.stmts.handOff, max(ceilMillis(unserved), t.adopt)
	}
	_, err := floor.ExecCommitted(ctx, t.db.DB, s.pool, s.conn, p)
	if t.wake != nil {
		t.wake.letGo(ctx) // after the row says released: woken followers take it
	}
	return classify(err, t.cfg.Table)
}

func (t *tableBackend) handOver(ctx context.Context, hold uint64, to string, window time.Duration) error {
	p := t.params(hold)
	p.To, p.Lease = to, ceilMillis(window)
	_, err := floor.ExecCommitted(ctx, t.db.DB, t.stmts.handOver.pool, t.stmts.handOver.conn, p)
	if t.wake != nil {
		t.wake.letGo(ctx) // after the row says released: woken followers look
	}
	return classify(err, t.cfg.Table)
}

func (t *tableBackend) setValue(v string) { t.value = v }

func (t *tableBackend) proclaim(ctx context.Context, hold uint64) (bool, error) {
	n, err := floor.ExecCommitted(ctx, t.db.DB, t.stmts.proclaim.pool, t.stmts.proclaim.conn, t.params(hold))
	return n == 1, classify(err, t.cfg.Table)
}

func (t *tableBackend) prefer(ctx context.Context, seen Record) (bool, error) {
	p := t.params(0)
	p.Term, p.Tenure = seen.Term, ceilMillis(t.cfg.PreferenceTenure)
	// A request not written (a session that would not commit it, see
	// commitsSQL) is asked again at the next look.
	res, err := t.exec(ctx, t.stmts.prefer.pool, p)
	if err != nil {
		return false, classify(err, t.cfg.Table)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *tableBackend) leader(ctx context.Context) (Record, error) {
	return ReadRecord(ctx, t.db.DB, t.cfg.Table, t.cfg.Name)
}

func (t *tableBackend) close() {
	if t.wake != nil {
		t.wake.close()
	}
}
