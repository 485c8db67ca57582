package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Assume forces candidate id to lead election name: the operator's REPLACE
// of the MySQL recipe, done so that the term still increases and the lease
// length is kept. The previous holder's next renewal fails and it stands down
// at once; candidate id claims the row at its next look and leads after its
// lock delay, so the two never lead at the same moment. If id never claims
// the row, it expires after its lease and the election goes on.
//
// The plain SQL equivalent (the term then comes from the database clock
// alone, and is lower than the old term if that clock is behind):
//
//	REPLACE INTO service_election (anchor, service_id, last_seen_active)
//	VALUES ('name', 'id', NOW(6));
//
// It returns the record as written. table may be empty for DefaultTable.
// The statement waits for a row lock on the server no longer than ctx
// allows (DefaultQueryTimeout without a deadline; see lockBound). On Galera
// the REPLACE can lose certification to the leader's renewal or fenced
// write on another node (error 1213): it is tried up to three times, and
// can still fail under a steady stream of fenced writes; retry, or run it
// through the leader's node (where it waits for them instead).
func Assume(ctx context.Context, db *sql.DB, table, name, id string) (Record, error) {
	op, err := newOperation(db, table, name, id)
	if err != nil {
		return Record{}, err
	}
	if _, err := op.exec(ctx, assumeSQL(quoteTable(op.table)), params{Name: name, Me: id, Lease: DefaultLeaseDuration.Milliseconds()}); err != nil {
		return Record{}, err
	}
	return Status(ctx, db, op.table, name)
}

// assumeSQL is Assume's statement on table tbl (quoted): it replaces election
// :name's row by one that names :me, with a new term and the old lease
// (:lease milliseconds when there was no row).
func assumeSQL(tbl string) string {
	cols, values := insertColumns([]column{
		{"anchor", ":name"},
		{"service_id", ":me"},
		{"last_seen_active", "NOW(6)"},
		{"term", "GREATEST(COALESCE(MAX(term), 0) + 1, " + termNowSQL + ")"},
		{"term_started_at", "NOW(6)"},
		{"lease_ms", "COALESCE(MAX(lease_ms), :lease)"},
		{"released", "0"},
		{"acquired", "'operator'"},
		{"value", "''"},
		{"backend", "COALESCE(MAX(backend), 'table')"},
		{"connection_id", "NULL"},
	})
	return `REPLACE INTO ` + tbl + ` (` + cols + `)
SELECT ` + values + `
FROM ` + tbl + ` WHERE anchor = :name`
}

// Reelect forces a re-election of election name: the operator's DELETE of
// the MySQL recipe. The holder stands down at its next renewal (and, if it
// recreated the row, releases it and sits out two retry intervals); a
// candidate that inserts a new row waits out its lock delay before leading.
// It returns the record that was deleted, and an error wrapping ErrNoLeader
// when there was no row.
//
// The next row's term is the database clock alone (see Election.Term).
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
	res, err := op.exec(ctx, reelectSQL(quoteTable(op.table)), params{Name: name})
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
func (o operation) exec(ctx context.Context, text string, p params) (sql.Result, error) {
	bound, err := operatorBound(ctx, o.db)
	if err != nil {
		return nil, err
	}
	query, args := bound.stmt(text).bind(p)
	res, err := execRetryingConflicts(ctx, o.db, query, args...)
	if err != nil {
		return nil, classify(err, o.table)
	}
	return res, nil
}

// execRetryingConflicts runs a single-statement write, again (up to three
// tries in all) while it fails with a deadlock error: on Galera, losing
// certification to a concurrent write of the same row (the leader's renewal
// or fenced write). Both operator statements read what they need afresh.
func execRetryingConflicts(ctx context.Context, db *sql.DB, query string, args ...any) (sql.Result, error) {
	for try := 1; ; try++ {
		res, err := db.ExecContext(ctx, query, args...)
		if try == 3 || mysqlErrno(err) != erLockDeadlock || ctx.Err() != nil {
			return res, err
		}
	}
}
