// Package heldtx runs package election's batched transactions on many
// elections' rows that their candidates hold (a Batcher's renewals and
// give-ups): the rows that still name their candidate and term are locked,
// rows locked by another transaction skipped, and a body acts on those, on
// a connection whose session is bounded for the batch. The statements'
// texts are election's (sql.go).
package heldtx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Row is an election's row as its candidate holds it: the election, the
// candidate's ID and its term; Ctx is the context of the caller that asks
// for it: a row whose caller gave up is left out, neither locked nor
// acted on (a caller that gave up retries: run both, a backlog doubles).
type Row struct {
	Ctx      context.Context
	Name, ID string
	Term     uint64
}

// key is a row's identity, as the lock finds it.
type key struct {
	name, id string
	term     uint64
}

// Tx is a batch's transaction on DB. Setup bounds the session and sets the
// transaction's isolation before it begins; Restore puts the session's
// values back after it committed.
type Tx struct {
	DB      *sql.DB
	Setup   []string
	Restore string
}

// Run runs f in one transaction on a connection of its own whose session
// Setup bounded first (election's batchStmts.bound: wait_timeout and the
// lock waits are the Batcher's QueryTimeout in whole seconds). A
// transaction cut off by a network partition after its SELECT … FOR
// UPDATE therefore holds the rows' locks on the server for about that
// long, not until the server's wait_timeout (8 hours by default) or TCP
// keepalive notice the client is gone. After a commit the connection's
// session is restored and it returns to the pool; after any error it is
// discarded. f gets rows' indices (held) whose rows lock (lock, SELECT …
// FOR UPDATE SKIP LOCKED of rows :names: anchor, service_id, term) and
// were found naming their candidate and term, each once; their results
// are true. Committed, the results stand even if the restore fails.
func (x Tx) Run(ctx context.Context, lock string, rows []Row, f func(c *sql.Conn, held []int) error) ([]bool, error) {
	out := make([]bool, len(rows))
	conn, err := x.DB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close() //nolint:errcheck // returned to the pool, or discarded
	if err = x.run(ctx, conn, lock, rows, out, f); err != nil {
		// Its session is bounded and may be in a transaction: close it
		// rather than pool it.
		floor.Discard(conn)
	}
	if err != nil && !errors.Is(err, errRestore) { // restore failed: committed, the results stand
		return nil, err
	}
	return out, nil
}

// run bounds conn's session, runs Run's transaction on conn
// (floor.InConnTx: its COMMIT too ends with ctx), sets out[i] for each
// row f got, and puts the session's values back.
func (x Tx) run(ctx context.Context, conn *sql.Conn, lock string, rows []Row, out []bool, f func(c *sql.Conn, held []int) error) error {
	for _, set := range x.Setup {
		if _, err := conn.ExecContext(ctx, set); err != nil {
			return err
		}
	}
	err := floor.InConnTx(ctx, conn, func(*sql.Conn) error {
		locked, err := lockRows(ctx, conn, lock, rows)
		if err != nil {
			return err
		}
		var held []int
		for i, r := range rows {
			if k := (key{r.Name, r.ID, r.Term}); locked[k] && r.Ctx.Err() == nil {
				out[i] = true
				held = append(held, i)
				delete(locked, k) // a row asked twice is done once
			}
		}
		if len(held) == 0 {
			return nil
		}
		return f(conn, held)
	})
	if err != nil {
		return err
	}
	if _, err = conn.ExecContext(ctx, x.Restore); err != nil {
		return fmt.Errorf("%w: %w", errRestore, err)
	}
	return nil
}

// lockRows locks the rows of rows whose callers still wait with lock and
// returns those it found.
func lockRows(ctx context.Context, conn *sql.Conn, lock string, rows []Row) (map[key]bool, error) {
	locked := make(map[key]bool)
	// A name twice in the list matches its row once.
	var names []string
	for _, r := range rows {
		if r.Ctx.Err() == nil {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return locked, nil
	}
	query, args := stmt.In(lock, names, nil)
	res, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	for res.Next() {
		var k key
		if err := res.Scan(&k.name, &k.id, &k.term); err != nil {
			return nil, err
		}
		locked[k] = true
	}
	return locked, res.Err()
}

// errRestore is run's failure to put the session's values back after its
// transaction committed.
var errRestore = errors.New("heldtx: restoring a batch's session")
