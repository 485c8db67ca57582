package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Assume forces candidate id to lead election name: the operator's REPLACE
// of the MySQL recipe, done so that the term still increases and the lease
// length is kept. The previous holder's next renewal fails and it stands down
// at once; candidate id claims the row at its next look and leads after its
// lock delay, so the two never lead at the same moment. If id never claims
// the row, it expires after its lease and the election goes on.
//
// The new term is above the old one and the election's term floor, which
// it raises in the same transaction. The plain SQL equivalent (the row's
// term then comes from the database clock alone, lower than the old one if
// that clock is behind; the named candidate still leads only with a term
// above the floor, which it takes when it claims the row):
//
//	REPLACE INTO service_election (anchor, service_id, last_seen_active)
//	VALUES ('name', 'id', NOW(6));
//
// It returns the record as written. table may be empty for DefaultTable.
// The statement waits for a row lock on the server no longer than ctx
// allows (DefaultQueryTimeout without a deadline; see stmt.Bound). On Galera
// the REPLACE can lose certification to the leader's renewal or fenced
// write on another node (error 1213; 3101 on a multi-primary Group
// Replication group): it is tried up to three times, and
// can still fail under a steady stream of fenced writes; retry, or run it
// through the leader's node (where it waits for them instead).
func Assume(ctx context.Context, db *sql.DB, table, name, id string) (Record, error) {
	op, err := newOperation(db, table, name, id)
	if err != nil {
		return Record{}, err
	}
	bound, err := operatorBound(ctx, db)
	if err != nil {
		return Record{}, err
	}
	tbl := quoteTable(op.table)
	assume, read := bound.Stmt(assumeSQL(tbl)), bound.Stmt(`SELECT term FROM `+tbl+` WHERE anchor = :name`)
	unsafe := false
	// The term is above the election's term floor, which is raised to
	// it in the same transaction (see floor.InTx).
	write := func(tx floor.Tx, floor uint64, _ bool) (uint64, error) {
		query, args := assume.Bind(stmt.Params{Name: name, Me: id, Lease: DefaultLeaseDuration.Milliseconds(), Floor: floor})
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			unsafe = true
			return 0, nil
		}
		var term uint64
		query, args = read.Bind(stmt.Params{Name: name})
		err = tx.QueryRowContext(ctx, query, args...).Scan(&term)
		return term, err
	}
	// Assume inserts no row: no lock delay to judge a first election by.
	f := newFloorStmts(op.table, bound, 0)
	for try := 1; ; try++ { // see execRetryingConflicts
		err = floor.InTxOnce(ctx, db, f, name, write)
		if try == 3 || !mysqlerr.WriteConflict(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return Record{}, classify(err, op.table)
	}
	if unsafe {
		return Record{}, fmt.Errorf("%w: Assume(%q, %q) in %s", ErrUnsafeSession, name, id, op.table)
	}
	return Status(ctx, db, op.table, name)
}

// assumeSQL is Assume's statement on table tbl (quoted): it replaces election
// :name's row by one that names :me, with a new term above the old one and
// the floor :floor, and the old lease (:lease milliseconds when there was no
// row).
func assumeSQL(tbl string) string {
	cols, values := insertColumns([]column{
		{"anchor", ":name"},
		{"service_id", ":me"},
		{"last_seen_active", clockSQL},
		{"term", "GREATEST(COALESCE(MAX(term), 0) + 1, " + termNewSQL + ")"},
		{"term_started_at", clockSQL},
		{"lease_ms", "COALESCE(MAX(lease_ms), :lease)"},
		{"released", "0"},
		{"acquired", "'operator'"},
		{"value", "''"},
		{"backend", "COALESCE(MAX(backend), 'table')"},
		{"connection_id", "NULL"},
	})
	return `REPLACE INTO ` + tbl + ` (` + cols + `)
SELECT ` + values + `
FROM ` + tbl + ` WHERE anchor = :name
HAVING ` + trustedSQL
}

// Reelect forces a re-election of election name: the operator's DELETE of
// the MySQL recipe. The holder stands down at its next renewal (and, if it
// recreated the row, releases it and sits out two retry intervals); a
// candidate that inserts a new row waits out its lock delay before leading.
// It returns the record that was deleted, and an error wrapping ErrNoLeader
// when there was no row.
//
// The election's term floor stays: the next row's term is above the
// deleted one's (see Election.Term).
//
// The plain SQL equivalent: DELETE FROM service_election WHERE anchor = 'name';
// The DELETE waits for a row lock on the server no longer than ctx allows
// (DefaultQueryTimeout without a deadline). On Galera the DELETE is tried up
// to three times, like Assume's REPLACE.
func Reelect(ctx context.Context, db *sql.DB, table, name string) (Record, error) {
	op, err := newOperation(db, table, name)
	if err != nil {
		return Record{}, err
	}
	prev, err := Status(ctx, db, op.table, name)
	if err != nil && !errors.Is(err, ErrNoLeader) {
		return Record{}, err
	}
	res, err := op.exec(ctx, reelectSQL(quoteTable(op.table)), stmt.Params{Name: name})
	if err != nil {
		return Record{}, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Record{Election: name}, fmt.Errorf("%w: %q in %s", ErrNoSuchElection, name, op.table)
	}
	return prev, nil
}

// reelectSQL is Reelect's statement on table tbl (quoted).
func reelectSQL(tbl string) string { return `DELETE FROM ` + tbl + ` WHERE anchor = :name` }

// RequestTransfer asks the live leader of election name to hand leadership
// to candidate to: the graceful counterpart of Assume, for a leader that
// runs. It sets the row's transfer_to; the leader sees it at its next
// renewal (within its RenewInterval), stands down (OnDemoted with
// ReasonTransferred), marks the row released and reserved for to, and wakes
// the followers: to takes over at once, with no lock delay, and no other
// candidate may take the row during the transfer window (2 × RetryInterval,
// see TransferWindow). If to does not run, the election falls back to a
// normal one when the window ends. A request naming the leader itself is
// cleared by its next renewal. A leader that died never acts on it: the row
// expires after its lease, and the takeover clears the request. See
// "Planned changes of leader" in the package documentation.
//
// The plain SQL equivalent:
//
//	UPDATE service_election SET transfer_to = 'id'
//	WHERE anchor = 'name' AND released = 0;
//
// It returns the record as written, without waiting for the leader to act,
// and an error wrapping ErrNoLeader (ErrNoSuchElection or ErrNoLiveLease)
// when nobody holds a live lease. Candidates of versions without transfers
// ignore the request (they renew over it).
func RequestTransfer(ctx context.Context, db *sql.DB, table, name, to string) (Record, error) {
	op, err := newOperation(db, table, name, to)
	if err != nil {
		return Record{}, err
	}
	return op.request(ctx, name, to)
}

// StepDown asks the live leader of election name to step down gracefully:
// the counterpart of Reelect for a leader that runs. The leader sees the
// request at its next renewal, stands down (OnDemoted with
// ReasonTransferred) and marks the row released, so that any follower takes
// over at once, with no lock delay; the old leader sits out two retry
// intervals, so another candidate wins. It returns what RequestTransfer
// does.
//
// The plain SQL equivalent (the empty string means "anyone"):
//
//	UPDATE service_election SET transfer_to = ''
//	WHERE anchor = 'name' AND released = 0;
func StepDown(ctx context.Context, db *sql.DB, table, name string) (Record, error) {
	op, err := newOperation(db, table, name)
	if err != nil {
		return Record{}, err
	}
	return op.request(ctx, name, "")
}

// requestSQL is RequestTransfer's and StepDown's statement on table tbl
// (quoted): it sets the live row's transfer_to to :to.
func requestSQL(tbl string) string {
	return `UPDATE ` + tbl + ` SET transfer_to = :to WHERE anchor = :name AND released = 0 AND ` + liveSQL
}

// request asks election name's live leader to hand over to to ("" for
// anyone).
func (o operation) request(ctx context.Context, name, to string) (Record, error) {
	res, err := o.exec(ctx, requestSQL(quoteTable(o.table)), stmt.Params{Name: name, To: to})
	if err != nil {
		return Record{}, err
	}
	rec, err := Status(ctx, o.db, o.table, name)
	if n, _ := res.RowsAffected(); n == 1 {
		// Written. The leader may have acted on it already (the row is
		// then released): that is not an error.
		return rec, nil
	}
	if err == nil && !(rec.Transfer && rec.TransferTo == to) {
		// The row was live but changed nothing: it was not live any more
		// when the statement ran, and is again (a new holder).
		return rec, fmt.Errorf("%w: %q was taken over while the request was sent; %q now leads (term %d)", ErrNoLiveLease, name, rec.ID, rec.Term)
	}
	return rec, err // the same request was there already, or no live lease
}

// operation is an operator's action (Assume, Reelect) on one election.
type operation struct {
	db    *sql.DB
	table string // validated, DefaultTable when the caller gave none
}

// newOperation checks an operator action's arguments: table may be empty
// for DefaultTable; ids are candidates' IDs.
func newOperation(db *sql.DB, table, name string, ids ...string) (operation, error) {
	if table == "" {
		table = DefaultTable
	}
	errs := []error{ValidateTable(table), ValidateName(name)}
	for _, id := range ids {
		errs = append(errs, ValidateID(id))
	}
	if err := errors.Join(errs...); err != nil {
		return operation{}, err
	}
	if db == nil {
		return operation{}, ErrNilDB
	}
	return operation{db: db, table: table}, nil
}

// exec runs the action's statement, text with named parameters taken from p,
// bounded by operatorBound, and retried on write conflicts
// (execRetryingConflicts).
func (o operation) exec(ctx context.Context, text string, p stmt.Params) (sql.Result, error) {
	bound, err := operatorBound(ctx, o.db)
	if err != nil {
		return nil, err
	}
	query, args := bound.Stmt(text).Bind(p)
	res, err := execRetryingConflicts(ctx, o.db, query, args...)
	if err != nil {
		return nil, classify(err, o.table)
	}
	return res, nil
}

// execRetryingConflicts runs a single-statement write, again (up to three
// tries in all) while it fails with a deadlock or write conflict
// (writeConflict): on Galera or a multi-primary Group Replication group,
// losing certification to a concurrent write of the same row (the leader's
// renewal or fenced write). Both operator statements read what they need afresh.
func execRetryingConflicts(ctx context.Context, db *sql.DB, query string, args ...any) (sql.Result, error) {
	for try := 1; ; try++ {
		res, err := db.ExecContext(ctx, query, args...)
		if try == 3 || !mysqlerr.WriteConflict(err) || ctx.Err() != nil {
			return res, err
		}
	}
}
