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
	if table == "" {
		table = DefaultTable
	}
	if err := errors.Join(ValidateTable(table), ValidateName(name), ValidateID(id)); err != nil {
		return Record{}, err
	}
	if db == nil {
		return Record{}, ErrNilDB
	}
	bound, err := operatorBound(ctx, db)
	if err != nil {
		return Record{}, err
	}
	tbl := quoteTable(table)
	_, err = execRetryingConflicts(ctx, db, bound.wrap(`REPLACE INTO `+tbl+` (anchor, service_id, last_seen_active, term,
  term_started_at, lease_ms, released, acquired, value, backend, connection_id)
SELECT ?, ?, NOW(6), GREATEST(COALESCE(MAX(term), 0) + 1, `+termNowSQL+`), NOW(6),
  COALESCE(MAX(lease_ms), ?), 0, 'operator', '', COALESCE(MAX(backend), 'table'), NULL
FROM `+tbl+` WHERE anchor = ?`), name, id, DefaultLeaseDuration.Milliseconds(), name)
	if err != nil {
		return Record{}, classify(err, table)
	}
	return Status(ctx, db, table, name)
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
	if table == "" {
		table = DefaultTable
	}
	if err := errors.Join(ValidateTable(table), ValidateName(name)); err != nil {
		return Record{}, err
	}
	if db == nil {
		return Record{}, ErrNilDB
	}
	prev, err := Status(ctx, db, table, name)
	if err != nil && !errors.Is(err, ErrNoLeader) {
		return Record{}, err
	}
	bound, err := operatorBound(ctx, db)
	if err != nil {
		return Record{}, err
	}
	res, err := execRetryingConflicts(ctx, db, bound.wrap(`DELETE FROM `+quoteTable(table)+` WHERE anchor = ?`), name)
	if err != nil {
		return Record{}, classify(err, table)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Record{Election: name}, fmt.Errorf("%w: election %q has no row", ErrNoLeader, name)
	}
	return prev, nil
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
