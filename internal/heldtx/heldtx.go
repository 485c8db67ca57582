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
// candidate's ID and its term.
type Row struct {
	Name, ID string
	Term     uint64
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
			if locked[r] {
				out[i] = true
				held = append(held, i)
				delete(locked, r) // a row asked twice is done once
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

// lockRows locks rows' rows with lock and returns those it found.
func lockRows(ctx context.Context, conn *sql.Conn, lock string, rows []Row) (map[Row]bool, error) {
	// A name twice in the list matches its row once.
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	query, args := stmt.In(lock, names, nil)
	res, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	locked := make(map[Row]bool)
	for res.Next() {
		var r Row
		if err := res.Scan(&r.Name, &r.ID, &r.Term); err != nil {
			return nil, err
		}
		locked[r] = true
	}
	return locked, res.Err()
}

// errRestore is run's failure to put the session's values back after its
// transaction committed.
var errRestore = errors.New("heldtx: restoring a batch's session")
