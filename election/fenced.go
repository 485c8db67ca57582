package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// fenceMode says how Fenced checks the term on a candidate's server:
// unknown (nil) until the first Fenced call found out, then whether the
// server is a node of a certification-based cluster (write the row) or not
// (one server: a share lock).
type fenceMode struct{ cluster atomic.Pointer[bool] }

// certifiedCluster reports whether the server is a node of a cluster that
// certifies write sets (Galera: wsrep_on; MySQL Group Replication in
// multi-primary mode), where only writes conflict across nodes. A server
// without such a variable is not; any other error is returned.
func certifiedCluster(ctx context.Context, tx *sql.Tx) (bool, error) {
	v, ok, err := stmt.ServerVariable(ctx, tx, "global.wsrep_on")
	if err != nil || (ok && stmt.IsOn(v)) {
		return ok && stmt.IsOn(v), err
	}
	v, ok, err = stmt.ServerVariable(ctx, tx, "global.group_replication_single_primary_mode")
	return err == nil && ok && !stmt.IsOn(v), err
}

// check runs the fence's check in tx and returns sql.ErrNoRows when the
// candidate does not hold term with a live lease. The first call finds out
// which check the server needs (one more query, once).
func (m *fenceMode) check(ctx context.Context, tx *sql.Tx, cfg settings, term uint64, bound stmt.Bound) error {
	if m.cluster.Load() == nil {
		is, err := certifiedCluster(ctx, tx)
		if err != nil {
			return err
		}
		m.cluster.Store(&is)
	}
	p := stmt.Params{Name: cfg.Name, Me: cfg.ID, Hold: term}
	if !*m.cluster.Load() {
		var one int
		return bound.Stmt(fencedCheckSQL(quoteTable(cfg.Table))).QueryRow(ctx, tx, p).Scan(&one)
	}
	n, err := bound.Stmt(fencedWriteSQL(quoteTable(cfg.Table))).Affected(ctx, tx, p)
	if err == nil && n != 1 {
		err = sql.ErrNoRows
	}
	return err
}

// fenced runs fn in a transaction on db that first checks, under a share
// lock on the election's row (a write of the row on a certification-based
// cluster, see fenceMode), that candidate id still holds term. bound limits
// the check's wait for the row lock (see stmt.Bound).
//
// The transaction runs on a connection of its own whose session may idle at
// most idle (whole seconds, at least 1) before the server drops it: a
// transaction cut off by a partition (a half-open connection) or left by a
// frozen process would otherwise keep its share lock, and every takeover
// waiting, until wait_timeout (8 hours by default). The session's own
// wait_timeout and completion_type are put back before the connection
// returns to the pool, in no transaction; after
// any error the connection is closed instead. The COMMIT is sent as a
// statement under ctx (tx.Commit cannot be cancelled), so that a commit
// whose answer does not come (a half-open connection, a stalled Galera
// cluster) never keeps the caller, and with it OnElected and Run, waiting.
func fenced(ctx context.Context, db *sql.DB, cfg settings, mode *fenceMode, term uint64, bound stmt.Bound, idle time.Duration, fn func(tx *sql.Tx) error) (err error) {
	if term == 0 {
		return ErrNotLeader
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("election: fenced: %w", err)
	}
	var tx *sql.Tx
	// The session's bounds: the server drops it after idle (whole seconds,
	// rounded up), and completion_type NO_CHAIN keeps database/sql's
	// ROLLBACK that ends the *sql.Tx from opening the next transaction and
	// leaving it on the pool (issue 31). restore puts the session's own
	// values back.
	idleSQL, restore := stmt.SessionSQL(true, stmt.SessionVar{Name: "wait_timeout", Value: max(int64((idle+time.Second-1)/time.Second), 1)},
		stmt.SessionVar{Name: "completion_type", Value: "'NO_CHAIN'"})
	defer func() { finishFenced(ctx, conn, tx, restore) }()
	if _, err = conn.ExecContext(ctx, idleSQL); err != nil {
		return fmt.Errorf("election: fenced: %w", err)
	}
	if tx, err = conn.BeginTx(ctx, nil); err != nil {
		return fmt.Errorf("election: fenced: begin: %w", err)
	}
	err = mode.check(ctx, tx, cfg, term, bound)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: election %q no longer held by %q with term %d", ErrNotLeader, cfg.Name, cfg.ID, term)
	}
	if err != nil {
		return fmt.Errorf("election: fenced: check: %w", probe.Classify(err, cfg.Table))
	}
	if err = fn(tx); err != nil {
		return err
	}
	// COMMIT as a statement of the transaction, under ctx; finishFenced's
	// Rollback then only ends the *sql.Tx (nothing is left to roll back).
	if _, err = tx.ExecContext(ctx, "COMMIT AND NO CHAIN NO RELEASE"); err != nil { // see floor.InConnTx
		return fmt.Errorf("election: fenced: commit: %w", err)
	}
	return nil
}

// finishFenced ends a fenced transaction's *sql.Tx (rolling back what was
// not committed) and gives its connection back to the pool with the
// session's own wait_timeout, or closes it when that fails. It waits for
// that only until ctx ends: database/sql sends its ROLLBACK without a
// deadline (when tx's context ends, too), and on a connection that stopped
// answering (half-open) that waits until the connection fails; such a
// finish goes on in the background meanwhile, so that Fenced, and with it
// OnElected and Run, never wait for it.
func finishFenced(ctx context.Context, conn *sql.Conn, tx *sql.Tx, restore string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ok := ctx.Err() == nil
		if tx != nil {
			ok = tx.Rollback() == nil && ok
		}
		if ok {
			_, err := conn.ExecContext(ctx, restore)
			ok = err == nil
		}
		if !ok {
			// Its session is bounded and may be in a transaction.
			floor.Discard(conn)
		}
		_ = conn.Close()
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Fenced runs fn in a transaction of the candidate's database that first
// checks, inside the transaction, that this candidate still leads with its
// current term and a live lease by the database clock. When the check fails,
// fn is not called, nothing changes, and the error wraps ErrNotLeader. When
// fn returns an error the transaction is rolled back and that error
// returned. No write of a deposed term commits after the takeover that
// deposed it:
//
//   - On one server (and a primary with replicas) the check takes a share
//     lock on the election's row: a takeover, which must update the row,
//     waits until the transaction ends, and then wins. Fenced transactions
//     of one leader run concurrently.
//   - On a certification-based cluster (Galera: wsrep_on; MySQL Group
//     Replication in multi-primary mode), where a lock is local to one node
//     and not part of the write set, the check instead writes the row (it
//     moves last_seen_active forward, extending the lease by the database
//     clock; the leader's own deadline is unchanged). The fenced transaction
//     and a takeover through any node then conflict in certification: the
//     one certified second fails with a deadlock error (1213) and changes
//     nothing. Fenced transactions of one leader are serialized on the row.
//     The first Fenced call reads the server's variables to choose (one more
//     query, once).
//
// fn must use tx for the writes to be fenced. From sqlx, use tx through a
// sqlx.Tx that has a Mapper, such as sqlx.NewDb(db, "mysql")'s:
// &sqlx.Tx{Tx: tx, Mapper: sdb.Mapper} (sqlx's Named methods panic on a
// sqlx.Tx without one). Keep the transaction shorter
// than RenewDeadline: this candidate's own renewals wait for it too. On
// Galera an operator's takeover through another node can lose to a steady
// stream of fenced writes (see operator.Operator.Assume).
//
// The transaction runs on a connection of its own whose session the server
// drops when it has been idle (no statement from the client) for
// LeaseDuration, rounded up to whole seconds: a transaction whose process
// froze or whose connection went half-open in a partition holds its share
// lock, and holds up every takeover, for at most that long instead of the
// server's wait_timeout (8 hours by default); it is then rolled back. Every
// statement, the COMMIT included, is bounded by ctx: pass the elected
// context, and Fenced returns soon after leadership ends even when the
// server does not answer. When ctx ends during the COMMIT the outcome is
// unknown, as with any commit whose answer is lost: the connection is
// closed, and the server either had committed (before any takeover, by the
// rules above) or rolls the transaction back. Two statements per call
// (bounding the session's idle time and putting it back) are the cost.
func (c *Candidate) Fenced(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return fenced(ctx, c.b.base().db, c.cfg, &c.fence, c.Term(), *c.bound.Load(), c.cfg.LeaseDuration, fn)
}

// fencedFor is Leadership.Fenced for the leadership of term whose elected
// context's Done channel is ended: it fails once that leadership ended, even
// when a later leadership of this candidate has begun, with the same term
// or another.
func (c *Candidate) fencedFor(ctx context.Context, ended <-chan struct{}, term uint64, fn func(tx *sql.Tx) error) error {
	now := c.Term() // read before ended: a later leadership starts after ended is closed
	select {
	case <-ended:
		now = 0
	default:
	}
	if now != term {
		return fmt.Errorf("%w: election %q: the leadership of term %d ended", ErrNotLeader, c.cfg.Name, term)
	}
	return fenced(ctx, c.b.base().db, c.cfg, &c.fence, term, *c.bound.Load(), c.cfg.LeaseDuration, fn)
}
