package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// The operator's statements, on the quoted election table tbl, with the
// named parameters of internal/stmt.

// assumeSQL replaces election :name's row by one that names :me, with a new
// term above the old one and the floor :floor, and the old lease (:lease
// milliseconds when there was no row). It writes nothing unless the
// session's clock is trusted (dbclock.Trusted).
func assumeSQL(tbl string) string {
	return `REPLACE INTO ` + tbl + ` (anchor, service_id, last_seen_active, term, term_started_at,
  lease_ms, released, acquired, value, backend, connection_id)
SELECT :name, :me, ` + dbclock.Now + `, GREATEST(COALESCE(MAX(term), 0) + 1, ` + dbclock.TermNew + `), ` + dbclock.Now + `,
  COALESCE(MAX(lease_ms), :lease), 0, 'operator', '', COALESCE(MAX(backend), 'table'), NULL
FROM ` + tbl + ` WHERE anchor = :name
HAVING ` + dbclock.Trusted
}

// reelectSQL deletes election :name's row.
func reelectSQL(tbl string) string { return `DELETE FROM ` + tbl + ` WHERE anchor = :name` }

// requestSQL sets the live row's transfer_to to :to.
func requestSQL(tbl string) string {
	return `UPDATE ` + tbl + ` SET transfer_to = :to WHERE anchor = :name AND released = 0 AND ` + dbclock.Live
}

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
// It returns the record as written. The statement waits for a row lock on
// the server no longer than ctx allows (5 s without a
// deadline). On Galera the REPLACE can lose certification to the
// leader's renewal or fenced write on another node (error 1213; 3101 on a
// multi-primary Group Replication group): it is tried up to three times,
// and can still fail under a steady stream of fenced writes; retry, or run
// it through the leader's node (where it waits for them instead).
func (o *Operator) Assume(ctx context.Context, name, id string) (election.Record, error) {
	if err := errors.Join(ident.Name(name), ident.ID(id)); err != nil {
		return election.Record{}, err
	}
	tbl := ident.Quote(o.table)
	unsafe := false
	err := o.retry(ctx, func(bound stmt.Bound) error {
		assume, read := bound.Stmt(assumeSQL(tbl)), bound.Stmt(`SELECT term FROM `+tbl+` WHERE anchor = :name`)
		// Assume inserts no row: no lock delay to judge a first election by.
		f := floor.NewStmts(o.table, bound, 0)
		// The term is above the election's term floor, which is raised to
		// it in the same transaction (see floor.InTx).
		return floor.InTxOnce(ctx, o.db, f, name, func(tx floor.Tx, floor uint64, _ bool) (uint64, error) {
			n, err := assume.Affected(ctx, tx, stmt.Params{Name: name, Me: id, Lease: election.DefaultLeaseDuration.Milliseconds(), Floor: floor})
			if err != nil || n == 0 {
				unsafe = err == nil // the session's clock is not trusted: nothing written
				return 0, err
			}
			var term uint64
			err = read.QueryRow(ctx, tx, stmt.Params{Name: name}).Scan(&term)
			return term, err
		})
	})
	if err != nil {
		return election.Record{}, err
	}
	if unsafe {
		return election.Record{}, fmt.Errorf("%w: Assume(%q, %q) in %s", election.ErrUnsafeSession, name, id, o.table)
	}
	return o.Status(ctx, name)
}

// Reelect forces a re-election of election name: the operator's DELETE of
// the MySQL recipe. The holder stands down at its next renewal (and, if it
// recreated the row, releases it and sits out two retry intervals); a
// candidate that inserts a new row waits out its lock delay before leading.
// It returns the record that was deleted, and an error wrapping
// election.ErrNoLeader when there was no row.
//
// The election's term floor stays: the next row's term is above the
// deleted one's.
//
// The plain SQL equivalent: DELETE FROM service_election WHERE anchor = 'name';
// The DELETE waits for a row lock on the server no longer than ctx allows
// (5 s without a deadline). On Galera the DELETE
// is tried up to three times, like Assume's REPLACE.
func (o *Operator) Reelect(ctx context.Context, name string) (election.Record, error) {
	if err := ident.Name(name); err != nil {
		return election.Record{}, err
	}
	prev, err := o.Status(ctx, name)
	if err != nil && !errors.Is(err, election.ErrNoLeader) {
		return election.Record{}, err
	}
	n, err := o.exec(ctx, reelectSQL(ident.Quote(o.table)), stmt.Params{Name: name})
	if err != nil {
		return election.Record{}, err
	}
	if n == 0 {
		return election.Record{Election: name}, fmt.Errorf("%w: %q in %s", election.ErrNoSuchElection, name, o.table)
	}
	return prev, nil
}

// Transfer asks the live leader of election name to hand leadership to
// candidate to: the graceful counterpart of Assume, for a leader that runs.
// It sets the row's transfer_to and wakes the leader (its bell, see
// below), which renews at once and finds the request (without the wake-up,
// at its next renewal, within its RenewInterval); it stands down (OnDemoted
// with election.ReasonTransferred), marks the row released and reserved for to,
// and wakes the followers: to takes over at once, with no lock delay, and
// no other candidate may take the row during the transfer window (2 ×
// RetryInterval, see TransferWindow). If to does not run, the election
// falls back to a normal one when the window ends. A request naming the
// leader itself is cleared by its next renewal. A leader that died never
// acts on it: the row expires after its lease, and the takeover clears the
// request. See "Planned changes of leader" in docs/algorithm.md.
//
// The plain SQL equivalent, the UPDATE, then the KILL QUERY that wakes the
// leader (optional: without it the leader acts at its next renewal):
//
//	UPDATE service_election SET transfer_to = 'id'
//	WHERE anchor = 'name' AND released = 0;
//	KILL QUERY IS_USED_LOCK(CONCAT('sqlelect.bell#', LEFT(SHA2(CONCAT(
//	  DATABASE(), CHAR(0), 'service_election', CHAR(0), 'name'), 256), 50)));
//
// The KILL ends the SELECT SLEEP that the leader's bell connection waits in
// (it holds the user-level lock so named, on a server with
// lower_case_table_names 0: see "Planned changes of leader" in
// docs/operations.md), and nothing else. A user may end its own user's
// statements; those of the leader's user need the CONNECTION_ADMIN
// privilege (MariaDB: CONNECTION ADMIN) or SUPER. Without it, or when the
// leader keeps no bell, the KILL fails (error 1095 or 1094), and
// Transfer ignores that: the leader acts at its next renewal.
//
// It returns the record as written, without waiting for the leader to act,
// and an error wrapping election.ErrNoLeader (ErrNoSuchElection or
// ErrNoLiveLease) when nobody holds a live lease. Candidates of versions
// without transfers ignore the request (they renew over it).
func (o *Operator) Transfer(ctx context.Context, name, to string) (election.Record, error) {
	return o.request(ctx, name, to, ident.ID(to))
}

// StepDown asks the live leader of election name to step down gracefully:
// the counterpart of Reelect for a leader that runs. The leader is woken
// as by Transfer (else sees the request at its next renewal), stands down (OnDemoted with
// election.ReasonTransferred) and marks the row released, so that any
// follower takes over at once, with no lock delay; the old leader sits out
// two retry intervals, so another candidate wins. It returns what Transfer
// does.
//
// The plain SQL equivalent (the empty string means "anyone"), followed by
// Transfer's KILL QUERY:
//
//	UPDATE service_election SET transfer_to = ''
//	WHERE anchor = 'name' AND released = 0;
func (o *Operator) StepDown(ctx context.Context, name string) (election.Record, error) {
	return o.request(ctx, name, "", nil)
}

// request asks election name's live leader to hand over to to ("" for
// anyone); toErr is the check of to (nil for anyone).
func (o *Operator) request(ctx context.Context, name, to string, toErr error) (election.Record, error) {
	if err := errors.Join(ident.Name(name), toErr); err != nil {
		return election.Record{}, err
	}
	n, err := o.exec(ctx, requestSQL(ident.Quote(o.table)), stmt.Params{Name: name, To: to})
	if err != nil {
		return election.Record{}, err
	}
	if n == 1 {
		// Wake the leader, which keeps a bell while it leads, so that it
		// acts on the request at once rather than at its next renewal: the
		// KILL QUERY of getlock.Ring. It fails without effect when the
		// leader's connections are another user's and this one lacks the
		// CONNECTION_ADMIN privilege (or SUPER), or when the leader keeps no
		// bell (its pool had no connection to spare, a Batcher,
		// Config.Tuning.DisableFastHandover, a version without one): the
		// leader acts at its next renewal, as it always does.
		rctx, cancel := context.WithTimeout(ctx, defaultQueryTimeout)
		_ = getlock.Ring(rctx, o.db, o.table, name)
		cancel()
		// Written. The leader may have acted on it already (the row is
		// then released): that is not an error.
		rec, _ := o.Status(ctx, name)
		return rec, nil
	}
	rec, err := o.Status(ctx, name)
	if err == nil && !(rec.Transfer && rec.TransferTo == to) {
		// The row was live but changed nothing: it was not live any more
		// when the statement ran, and is again (a new holder).
		return rec, fmt.Errorf("%w: %q was taken over while the request was sent; %q now leads (term %d)", election.ErrNoLiveLease, name, rec.ID, rec.Term)
	}
	return rec, err // the same request was there already, or no live lease
}
