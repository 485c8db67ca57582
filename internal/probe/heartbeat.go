package probe

// The table backend's heartbeat, the one statement that decides who leads
// (election's sql.go runs it; the model's R, X and T), kept here because
// Run's preflight and the doctor probe the server with it (RunHeartbeat),
// and the column list a candidate reads a row with.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// RecordColumns select an election's row for election's Record.scan.
// Timestamps come as decimal Unix seconds (UNIX_TIMESTAMP of a TIMESTAMP
// column is exact and needs no time zone), so the DSN needs no parseTime.
// The SELECT privilege probe (Privileges) reads them too.
const RecordColumns = `anchor, service_id, term,
  CAST(UNIX_TIMESTAMP(term_started_at) AS CHAR) AS since,
  CAST(UNIX_TIMESTAMP(last_seen_active) AS CHAR) AS last_seen,
  lease_ms, released <> 0 AS released, acquired, value, backend,
  COALESCE(connection_id, 0) AS connection_id, transfer_to, priority,
  ` + LeaseLeft + ` AS left_us`

// LeaseLeft is what is left of a row's lease, in microseconds by the
// database clock: not positive once it ran out.
const LeaseLeft = `TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), last_seen_active + INTERVAL lease_ms * 1000 MICROSECOND)`

// HoldsCond is true while the row names the candidate (:me) with the term it
// holds (:hold), not released.
const HoldsCond = `service_id=:me AND term=:hold AND released=0`

// unsafeSessionSQL is the heartbeat's anchor: :name while dbclock.Trusted holds,
// else NULL, which no INSERT may write into the primary key: the statement
// then fails with error 1048 (ER_BAD_NULL_ERROR, whatever the sql_mode: a
// single-row INSERT) before it looks at the row, and changes nothing (see
// errUnsafeSession). The VALUES list is evaluated once, so the check is
// made once per statement.
const unsafeSessionSQL = `IF(` + dbclock.Trusted + `,:name,NULL)`

// expiredSQL is true when the row's lease has run out by the database
// clock (dbclock.Now). The heartbeat evaluates it once, in its decision.
const expiredSQL = `last_seen_active+INTERVAL lease_ms*1000 MICROSECOND<=` + dbclock.Now

// The heartbeat's conditions (see HeartbeatSQL), with :me the candidate and
// :hold the term it holds (0 when it holds none).
const (
	// RenewCond (R): the row is the candidate's, with the term it holds,
	// and no transfer or step-down is asked of it (a transfer to itself
	// asks nothing: the renewal clears it).
	RenewCond = HoldsCond + ` AND IFNULL(transfer_to=:me,1)`
	// decideSQL is the heartbeat's decision on the row as it stands,
	// evaluated once (see HeartbeatSQL): 'renewed' (R); how a take
	// acquires the row ('expired', 'claimed', 'released', 'transferred');
	// or NULL, no change. A released row is reserved while its lease (the
	// transfer window) runs, for transfer_to unless that is empty; a row
	// that names the candidate but carries a request (an operator asked
	// its holder to hand over) is not claimed: it is left to its holder,
	// or to expire.
	decideSQL = `CASE
WHEN ` + RenewCond + ` THEN 'renewed'
WHEN released AND transfer_to=:me THEN 'transferred'
WHEN ` + expiredSQL + ` THEN IF(released,'released','expired')
WHEN released=0 THEN IF(service_id=:me AND transfer_to IS NULL,'claimed',NULL)
WHEN IFNULL(transfer_to='',1) THEN 'released'
END`
)

// HeartbeatSQL is the heartbeat on table tbl (quoted): one INSERT … ON
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
// (judgeAssignmentOrder). A leader asked to hand over (transfer_to set on
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
func HeartbeatSQL(tbl string) string {
	return heartbeatInsert(tbl) + `
VALUES(` + unsafeSessionSQL + `,` + heartbeatValues + `)
` + heartbeatUpdate
}

// HeartbeatAllSQL is the heartbeat on many rows of table tbl (quoted) in
// one statement, for candidate :me: an INSERT … SELECT of the heartbeat's
// values from the derived table :rows (stmt.Params.Rows: each row's :name,
// :hold, :lease, :value, :priority, :floor and :insert), with the same ON
// DUPLICATE KEY UPDATE, which the server evaluates once per row, with that
// row's values (model/README.md, "One heartbeat statement for a batch").
// A multi-row INSERT writes NULL into the anchor as its implicit default,
// the empty string, under a sql_mode that is not strict, so the anchor is not the
// check of the session (unsafeSessionSQL): the statement inserts and
// changes nothing unless dbclock.Trusted holds. Its affected rows and
// LAST_INSERT_ID are the sums and the last of all rows': the caller reads
// the rows before and after it.
func HeartbeatAllSQL(tbl string) string {
	return heartbeatInsert(tbl) + `
SELECT ` + stmt.Rebind(`:name,`+heartbeatValues, "r", "me") + `
FROM (:rows) r WHERE ` + dbclock.Trusted + `
` + stmt.Rebind(heartbeatUpdate, "r", "me")
}

// heartbeatInsert is the heartbeat's INSERT into table tbl (quoted), with
// its columns. The insert: last_seen_active after term_started_at, since
// SYSDATE(6) is read at each call, and a row whose last renewal came before
// its term began would say so (a first election leads before it renews).
// released, backend, connection_id, transfer_to and decision keep their
// defaults: 0, 'table', NULL, NULL, NULL.
func heartbeatInsert(tbl string) string {
	return `INSERT INTO ` + tbl + `(anchor,service_id,term,term_started_at,last_seen_active,lease_ms,acquired,value,priority)`
}

// The heartbeat's values after the anchor, and its ON DUPLICATE KEY UPDATE
// list, which decides once and applies the decision (see HeartbeatSQL).
// took is a take's decision; every other reads the decision as a number:
// NULL, no change, or its place in the ENUM (1 is 'renewed').
const (
	took            = `decision>1`
	heartbeatValues = `:me,LAST_INSERT_ID(` + dbclock.TermNew + `),` + dbclock.Now + `,` + dbclock.Now + `,:lease,:insert,:value,:priority`
	heartbeatUpdate = `ON DUPLICATE KEY UPDATE
decision=` + decideSQL + `,
acquired=IF(` + took + `,decision,acquired),
term_started_at=IF(` + took + `,` + dbclock.Now + `,term_started_at),
term=LAST_INSERT_ID(IF(` + took + `,GREATEST(term+1,` + dbclock.TermNow + `,:floor+1),term)),
service_id=IF(decision,:me,service_id),
value=IF(decision,:value,value),
backend=IF(decision,'table',backend),
connection_id=IF(decision,NULL,connection_id),
transfer_to=IF(decision,NULL,transfer_to),
released=IF(decision,0,released),
lease_ms=IF(decision,:lease,lease_ms),
last_seen_active=IF(decision,` + dbclock.Now + `,last_seen_active),
priority=IF(decision,:priority,priority),
decision=NULL`
)

// RunHeartbeat runs the table backend's own heartbeat statement on
// election name of tbl (quoted) through ex, in five steps: candidate A
// inserts the row (1 affected row), renews it (2), B looks at A's live row
// (0, or 1 under CLIENT_FOUND_ROWS), A lets it expire at once (1: an
// UPDATE), and B takes the expired row (2) with a higher term; the renewal
// must keep A's term. Last, it writes a decision outside the heartbeat,
// which the table must refuse (decisionGuarded). It reports whether the
// server counts found rows (CLIENT_FOUND_ROWS), and fails with
// ErrUnsafeServer where the server answered otherwise than MySQL and
// MariaDB do; other errors are its statements'. Run's preflight runs it in
// a transaction it rolls back (Server); the doctor on the pool, and deletes
// the row.
func RunHeartbeat(ctx context.Context, ex stmt.Execer, tbl, name string) (foundRows bool, err error) {
	hb := stmt.Must(HeartbeatSQL(tbl))
	// Expired a day ago, so that the takeover sees it expired whatever the
	// session's clock (one behind, which the heartbeat tolerates, judges
	// expiry later).
	expire := stmt.Must(`UPDATE ` + tbl + ` SET last_seen_active = last_seen_active - INTERVAL 1 DAY, lease_ms = 0, transfer_to = NULL
WHERE anchor = :name AND ` + HoldsCond)
	a := stmt.Params{Name: name, Me: A, Lease: 60000}
	b := stmt.Params{Name: name, Me: B, Lease: 60000}
	var counts [5]int64
	var terms [5]uint64 // each step's LAST_INSERT_ID: the row's term after the heartbeats
	for i, step := range []struct {
		what   string
		s      stmt.Stmt
		params *stmt.Params
	}{
		{"insert", hb, &a},
		{"renew", hb, &a},
		{"another candidate's look at the live row", hb, &b},
		{"expire", expire, &a},
		{"take over the expired row", hb, &b},
	} {
		a.Hold = terms[0] // A holds the term it inserted
		res, err := step.s.Exec(ctx, ex, *step.params)
		if err == nil {
			counts[i], err = res.RowsAffected()
		}
		if err != nil {
			return false, fmt.Errorf("election: the heartbeat probe's step %d (%s): %w", i+1, step.what, err)
		}
		id, _ := res.LastInsertId()
		terms[i] = uint64(id)
	}
	guarded, err := decisionGuarded(ctx, ex, tbl, name)
	if err != nil {
		return false, err
	}
	want := [5]int64{1, 2, counts[2], 1, 2} // the look: 0, or 1 under CLIENT_FOUND_ROWS
	switch {
	case counts != want || counts[2] > 1 || terms[4] <= terms[0]:
		return false, fmt.Errorf("%w: the heartbeat (INSERT … ON DUPLICATE KEY UPDATE) reported %s affected rows for insert, renew, "+
			"no change, expire, take over, where MySQL and MariaDB report 1, 2, 0 (1 with clientFoundRows), 1, 2; terms %d then %d: "+
			"this server would let two candidates lead at once, or none",
			ErrUnsafeServer, strings.ReplaceAll(strings.Trim(fmt.Sprint(counts), "[]"), " ", ", "), terms[0], terms[4])
	case terms[1] != terms[0]:
		return false, fmt.Errorf("%w: the renewal reported term %d for a row of term %d: the decision column's ENUM is not "+
			"('renewed', 'expired', 'claimed', 'released', 'transferred') in that order, so a renewal counts as a take: "+
			"two candidates could lead at once", ErrUnsafeServer, terms[1], terms[0])
	case !guarded:
		return false, fmt.Errorf("%w: the decision column took a value written outside the heartbeat: its CHECK constraint (decision IS NULL) "+
			"is missing or not enforced (MySQL: NOT ENFORCED; MariaDB: check_constraint_checks=0), and a value left "+
			"there makes a heartbeat that changes nothing count as a renewal: two candidates could lead at once", ErrUnsafeServer)
	}
	return counts[2] == 1, nil
}

// decisionGuarded writes a decision outside the heartbeat to election name
// of tbl, which the table must refuse (its CHECK constraint, enforced on
// this session), and reports whether it did. A value left in the column
// would make a heartbeat that decides nothing count as a change (2
// affected rows).
func decisionGuarded(ctx context.Context, ex stmt.Execer, tbl, name string) (bool, error) {
	switch _, err := stmt.Must(`UPDATE `+tbl+` SET decision = 'renewed' WHERE anchor = :name`).Exec(ctx, ex, stmt.Params{Name: name}); {
	case err == nil:
		if _, err := ex.ExecContext(ctx, `UPDATE `+tbl+` SET decision = NULL WHERE anchor = ?`, name); err != nil {
			return false, fmt.Errorf("election: the heartbeat probe's clean-up of the decision column: %w", err)
		}
		return false, nil
	case IsCheckViolation(err):
		return true, nil
	default:
		return false, fmt.Errorf("election: the heartbeat probe's step 6 (a decision written outside the heartbeat): %w", err)
	}
}

// errScratch makes floor.InConnTx roll the heartbeat probe's transaction
// back (see Server).
var errScratch = errors.New("probe: the scratch transaction is rolled back")

// Server is the cheap subset of the doctor that Run's preflight sends
// (the table backend's; see Preflight) on election table table: the heartbeat probe
// (RunHeartbeat), in a transaction it rolls back, so that nothing is
// written, no DELETE privilege is needed and no row is left. A server that
// answers with the wrong affected rows fails with ErrUnsafeServer
// (permanent: Run stops). Errors are left to the campaign (a read-only
// server may become writable; a missing privilege is classified and stops
// Run as the heartbeat would), but for a statement the server refuses as
// no MySQL or MariaDB does (ER_PARSE_ERROR, or ER_UNKNOWN_ERROR, what
// other servers answer for what they do not support: no candidate could
// take over), ErrUnsafeServer too.
//
// The transaction's BEGIN and ROLLBACK are statements under ctx
// (floor.InConnTx), not database/sql's, whose ROLLBACK has no deadline: on
// a connection that stopped answering (a lost reply) it waited until the
// connection failed, and Run with it (TestServerRollbackBounded).
func Server(ctx context.Context, db *sql.DB, table string) error {
	var err error
	ran := false
	_ = floor.InConnTx(ctx, db, func(c *sql.Conn) error {
		ran = true
		_, err = RunHeartbeat(ctx, c, ident.Quote(table), fmt.Sprintf("%s%08x", ScratchPrefix, rand.Uint32()))
		return errScratch
	})
	if !ran {
		return nil // no connection, or no BEGIN: the campaign will say
	}
	err = Classify(err, table)
	switch n := mysqlerr.Errno(err); {
	case err == nil, errors.Is(err, ErrUnsafeServer), errors.Is(err, ErrAccessDenied):
		return err
	case n == 1064 || n == 1105:
		// Not MySQL's or MariaDB's answer to the statement candidates
		// send (go-mysql-server refuses a takeover with 1105): no
		// candidate could ever take over.
		return fmt.Errorf("%w: the server refuses the heartbeat statement: %w", ErrUnsafeServer, err)
	default:
		return nil // a read-only server, a conflict, a timeout: the campaign will say
	}
}
