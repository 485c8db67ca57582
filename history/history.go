// Package history reads the history of an election: every term sqlelect
// assigned, who held it, how it began and how it ended (migration 10:
// service_election_history, or <table>_history).
//
// Candidates write it, in the transaction that assigns a term and raises
// the election's term floor, so that a term is in the history exactly when
// it was issued:
//   - a new term is appended with its holder, how it began (the row's
//     acquired: first, insert, expired, released, transferred, claimed,
//     lock, operator) and its start by the database clock;
//   - the terms before it that are still open are ended at its start, with
//     why as the new holder saw the row: expired (the lease ran out), lost
//     (the lock backend's holder lost its lock), resigned, transferred,
//     deleted (the row was gone), replaced (an operator wrote the row), or
//     claimed (its holder's ID took it anew, after an operator named it or
//     a restart);
//   - a holder that resigns or hands over ends its own term, at the moment
//     it let go, in the transaction that gives the row up.
//
// A term whose holder never led has a row too: an operator's Assume, the
// lock backend's placeholder, a hold lost while it waited out its lock
// delay. Each election keeps its last 1,000 terms: a term is written over
// the oldest. Terms written by candidates older than migration 10, and an
// operator's plain-SQL REPLACE (whose term the named candidate replaces
// when it claims the row), are not in it.
package history

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/probe"
)

// Term is one term of an election's history.
type Term struct {
	Election string    `json:"election"`
	Term     uint64    `json:"term"`
	Holder   string    `json:"holder"`
	Began    string    `json:"began"`   // how: the election row's acquired
	Started  time.Time `json:"started"` // by the database clock, UTC
	// Ended is when the term ended, zero while it runs or when nobody
	// knows; End says why ("" then).
	Ended time.Time `json:"ended,omitzero"`
	End   string    `json:"end,omitempty"`
}

// Table returns the history table of election table table (default
// service_election): table + "_history".
func Table(table string) string { return floor.History(cmp.Or(table, election.DefaultTable)) }

// List returns the terms of election name in election table table
// (default service_election) that ran at or after since (all for the zero
// time), oldest first. A missing history table is an error wrapping
// election.ErrTableMissing.
func List(ctx context.Context, db *sql.DB, table, name string, since time.Time) ([]Term, error) {
	tbl := Table(table)
	rows, err := db.QueryContext(ctx, `SELECT term, holder, began, started_at, COALESCE(ended_at, 0), COALESCE(ended, '')
FROM `+ident.Quote(tbl)+` WHERE anchor = ? AND (ended_at IS NULL OR ended_at >= ?) ORDER BY term`, name, since.UnixMicro())
	if err != nil {
		if err = probe.Classify(err, tbl); errors.Is(err, election.ErrTableMissing) {
			return nil, fmt.Errorf("history: %w (migration 10: run the migrations, sqlelect migrate up)", err)
		}
		return nil, fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	var ts []Term
	for rows.Next() {
		t := Term{Election: name}
		var started, ended int64
		if err := rows.Scan(&t.Term, &t.Holder, &t.Began, &started, &ended, &t.End); err != nil {
			return nil, fmt.Errorf("history: reading %s: %w", tbl, err)
		}
		t.Started = time.UnixMicro(started).UTC()
		if ended > 0 {
			t.Ended = time.UnixMicro(ended).UTC()
		}
		ts = append(ts, t)
	}
	return ts, rows.Err()
}
