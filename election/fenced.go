package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// fencedCheckSQL locks the election's row in share mode and matches it only
// while it names this candidate with the given term and a live lease. The
// share lock makes any takeover (which must update the row) wait until the
// transaction ends. LOCK IN SHARE MODE works on MySQL 8 and MariaDB alike.
const fencedCheckSQL = `SELECT 1 FROM %s WHERE anchor = ? AND service_id = ? AND term = ? AND released = 0
  AND last_seen_active + INTERVAL lease_ms * 1000 MICROSECOND > NOW(6) LOCK IN SHARE MODE`

// fenced runs fn in a transaction on db that first checks, under a share
// lock on the election's row, that candidate id still holds term. bound
// limits the check's wait for the row lock (see lockBound).
func fenced(ctx context.Context, db *sql.DB, cfg Config, term uint64, bound lockBound, fn func(tx *sql.Tx) error) (err error) {
	if term == 0 {
		return ErrNotLeader
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("election: fenced: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var one int
	err = tx.QueryRowContext(ctx, bound.wrap(fmt.Sprintf(fencedCheckSQL, quoteTable(cfg.Table))), cfg.Name, cfg.ID, term).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: election %q no longer held by %q with term %d", ErrNotLeader, cfg.Name, cfg.ID, term)
	}
	if err != nil {
		return fmt.Errorf("election: fenced: check: %w", classify(err, cfg.Table))
	}
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("election: fenced: commit: %w", err)
	}
	return nil
}

// Fenced runs fn in a transaction of the candidate's database that first
// checks, inside the transaction and under a share lock on the election's
// row, that this candidate still leads with its current term and a live
// lease by the database clock. No takeover can commit while the transaction
// runs: a takeover waits for it, and then wins. When the check fails, fn is
// not called, nothing changes, and the error wraps ErrNotLeader. When fn
// returns an error the transaction is rolled back and that error returned.
//
// fn must use tx for the writes to be fenced. Keep the transaction shorter
// than RenewDeadline: this candidate's own renewals wait for it too.
//
// On Galera the share lock is local to one node: a takeover through another
// node is not delayed; instead the fenced transaction fails at commit with a
// deadlock error (1213) and changes nothing. Either way no write of a
// deposed term commits after the takeover.
func (c *candidate) Fenced(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return fenced(ctx, c.db, c.cfg, c.Term(), stmtBound(c.b), fn)
}
