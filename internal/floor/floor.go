// Package floor keeps the term floor (migration 6; election/doc.go,
// "Terms"): per election, the highest term the library issued, in the
// table Table(table), which an operator's DELETE or REPLACE of the
// election's row does not touch. Every
// statement that assigns a term (the table backend's heartbeat, the lock
// backend's take and insert, Assume) runs in one transaction with the
// election's floor row (InTx): it locks the row, writes a term of at
// least the floor plus one, and raises the floor to it. So every term a
// candidate takes is above every term issued before it, across a DELETE, a
// REPLACE and a database clock set back. And an election with no floor row
// never had a term: its first insert is acquired = 'first', and leads
// without the lock delay; the floor row it creates makes every later insert
// (after a DELETE) an 'insert', which waits the delay out.
//
// That holds only while the floor table keeps its history: a TRUNCATE, a
// DELETE of a floor row, or the table created (migration 6) just after a
// DELETE of a row whose leader still runs, would make an insert 'first'
// while that leader believes. So 'first' also needs the floor table's
// marker (migration 8: the row whose anchor is empty): its term_floor the sum
// of CRC32(anchor) over the other floor rows (each floor row the library
// creates is added in the same transaction), its marked_at at least
// LockDelay ago. A transaction that finds it missing or wrong writes it
// again, after a floor row for every election row (model/README.md, "Issue
// 31 item 1").
//
// The same transaction writes the term into the election's history
// (migration 10: History(table); package history reads it): the term, its
// holder, how it began (the row's acquired) and when, and the end of the
// terms before it as the new holder saw the row (a resigning holder writes
// its own end first: election's Candidate.releaseHold). So a term is in the
// history exactly when it was issued. The floor row counts the terms it was
// raised to, and a term goes into slot count mod HistoryKeep, over the
// oldest: no statement more, and no read after the term's write, which a
// Galera node's applier aborts the transaction for under load. No
// statement of the election reads the history.
package floor

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Table returns the name of the term floor table of election table table
// (not empty): table with "_floor" appended, in the same database
// (service_election_floor for the default). Migration 6 creates it for the
// default table; schema.DDL(table) renames both.
func Table(table string) string { return table + "_floor" }

// History returns the name of the history table of election table table
// (migration 10): table with "_history" appended (service_election_history
// for the default).
func History(table string) string { return table + "_history" }

// HistoryKeep is how many terms of each election the history keeps: the
// slots of its ring (migration 10).
const HistoryKeep = 1000

// Stmts are the statements on an election's floor row.
type Stmts struct {
	// Read locks election :name's floor row and reads it.
	Read stmt.Stmt
	// Raise raises election :name's floor to :term (creating its row).
	Raise stmt.Stmt
	// Marker locks the marker and reads its sum and whether it was
	// written at least the lock delay ago.
	Marker stmt.Stmt
	// Sum is the sum of CRC32(anchor) over the floor rows.
	Sum stmt.Stmt
	// Count adds election :name's new floor row to the marker's sum.
	Count stmt.Stmt
	// Seed gives every election row a floor row, at its term.
	Seed stmt.Stmt
	// Mark writes the marker: sum :term, written now.
	Mark stmt.Stmt
	// Resume starts a new floor row's count where the election's history
	// left it (a floor row deleted by an operator; Seed's rows do too), so
	// that Append goes on over the oldest slot.
	Resume stmt.Stmt
	// The statements on many elections, each term a transaction assigned
	// (stmt.In fills their lists: :names, and :terms, each name's term).
	// ReadAll locks the floor rows of elections :names and reads them;
	// RaiseAll raises each one's floor to its term (each has a floor row);
	// CreateAll creates the floor rows of elections that have none, each
	// at its term as its row says, CountAll adds them to the marker's sum,
	// and ResumeAll starts their counts where their histories left them.
	// Append writes each one's term, as its row now says, into the
	// history, in its floor's next slot; Close ends the history's open
	// terms before it, as the row says the term began. Take runs Close and
	// Append for one election.
	ReadAll, RaiseAll, CreateAll, CountAll, ResumeAll, Append, Close string
	// Peek reads nothing: preflight's check that the table exists, with
	// the marker's column, and that the history table does.
	Peek [2]string
}

// NewStmts returns the floor statements of election table table, its floor
// table and its history table, bounded by b, for a candidate whose lock
// delay is lockDelay.
func NewStmts(table string, b stmt.Bound, lockDelay time.Duration) Stmts {
	tbl, ftbl, htbl, termNow := ident.Quote(table), ident.Quote(Table(table)), ident.Quote(History(table)), dbclock.TermNow
	// A term's start, from the row (a TIMESTAMP: UNIX_TIMESTAMP needs no
	// time zone), in microseconds as terms are.
	const started = `FLOOR(UNIX_TIMESTAMP(e.term_started_at)*1000000)`
	// What Close reads of the election's row e (expr, of its columns and
	// the history row h's): scalar subqueries, not a join. A multi-table
	// UPDATE cost MariaDB 0.3–0.4 ms more to plan than this one, on a
	// handover's path.
	ofRow := func(expr string) string {
		return `(SELECT ` + expr + ` FROM ` + tbl + ` e FORCE INDEX (PRIMARY) WHERE e.anchor = h.anchor)`
	}
	return Stmts{
		Read: b.Stmt(`SELECT term_floor FROM ` + ftbl + ` WHERE anchor = :name FOR UPDATE`),
		// No VALUES() (deprecated on MySQL): :term again.
		Raise: b.Stmt(`INSERT INTO ` + ftbl + ` (anchor, term_floor) VALUES (:name, :term)
ON DUPLICATE KEY UPDATE term_floor = GREATEST(term_floor, :term), terms = terms + 1`),
		Marker: b.Stmt(`SELECT term_floor, IFNULL(marked_at + ` + strconv.FormatInt(lockDelay.Microseconds(), 10) + ` <= ` + termNow + `, 0)
FROM ` + ftbl + ` WHERE anchor = '' FOR UPDATE`),
		Sum:   b.Stmt(`SELECT COALESCE(SUM(CRC32(anchor)), 0) FROM ` + ftbl + ` WHERE anchor <> ''`),
		Count: b.Stmt(`UPDATE ` + ftbl + ` SET term_floor = term_floor + CRC32(:name) WHERE anchor = ''`),
		Seed: b.Stmt(`INSERT INTO ` + ftbl + ` (anchor, term_floor, terms) SELECT anchor, term, ` + resume(htbl, tbl+`.anchor`) + ` FROM ` + tbl + `
ON DUPLICATE KEY UPDATE term_floor = GREATEST(term_floor, ` + tbl + `.term)`),
		Mark: b.Stmt(`INSERT INTO ` + ftbl + ` (anchor, term_floor, marked_at) VALUES ('', :term, ` + termNow + `)
ON DUPLICATE KEY UPDATE term_floor = :term, marked_at = ` + termNow),
		Resume: b.Stmt(`UPDATE ` + ftbl + ` SET terms = ` + resume(htbl, `:name`) + ` WHERE anchor = :name`),
		// FORCE INDEX (PRIMARY) wherever a list of names finds rows: from
		// about 40 names the optimizer may scan the table instead, and
		// under REPEATABLE READ a scan locks every row it reads (see
		// election's batch renewal); TestTakeAllUsesKey. Close finds the
		// open terms by open_terms: for one election a range that reads
		// those alone, where the primary key read every kept term (up to
		// HistoryKeep).
		ReadAll:   b.Wrap(`SELECT anchor, term_floor FROM ` + ftbl + ` FORCE INDEX (PRIMARY) WHERE anchor IN (:names) FOR UPDATE`),
		RaiseAll:  b.Wrap(`UPDATE ` + ftbl + ` FORCE INDEX (PRIMARY) SET term_floor = GREATEST(term_floor, CASE anchor :terms END), terms = terms + 1 WHERE anchor IN (:names)`),
		CreateAll: b.Wrap(`INSERT INTO ` + ftbl + ` (anchor, term_floor) SELECT e.anchor, e.term FROM ` + tbl + ` e FORCE INDEX (PRIMARY) WHERE e.anchor IN (:names) AND e.term = CASE e.anchor :terms END`),
		CountAll:  b.Wrap(`UPDATE ` + ftbl + ` SET term_floor = term_floor + (SELECT COALESCE(SUM(CRC32(e.anchor)), 0) FROM ` + tbl + ` e FORCE INDEX (PRIMARY) WHERE e.anchor IN (:names)) WHERE anchor = ''`),
		ResumeAll: b.Wrap(`UPDATE ` + ftbl + ` FORCE INDEX (PRIMARY) SET terms = ` + resume(htbl, ftbl+`.anchor`) + ` WHERE anchor IN (:names)`),
		Append: b.Wrap(`INSERT INTO ` + htbl + ` (anchor, slot, term, holder, began, started_at)
SELECT e.anchor, f.terms MOD ` + strconv.Itoa(HistoryKeep) + `, e.term, e.service_id, e.acquired, ` + started + `
FROM ` + tbl + ` e FORCE INDEX (PRIMARY) JOIN ` + ftbl + ` f FORCE INDEX (PRIMARY) ON f.anchor = e.anchor WHERE e.anchor IN (:names) AND e.term = CASE e.anchor :terms END
ON DUPLICATE KEY UPDATE term = e.term, holder = e.service_id, began = e.acquired, started_at = ` + started + `, ended_at = NULL, ended = NULL`),
		Close: b.Wrap(`UPDATE ` + htbl + ` h FORCE INDEX (open_terms) SET h.ended = ` + ofRow(`CASE e.acquired
  WHEN 'expired' THEN 'expired' WHEN 'released' THEN 'resigned' WHEN 'transferred' THEN 'transferred' WHEN 'lock' THEN 'lost'
  WHEN 'claimed' THEN IF(h.holder = e.service_id COLLATE utf8mb4_bin, 'claimed', 'replaced') WHEN 'operator' THEN 'replaced' ELSE 'deleted' END`) + `,
  h.ended_at = ` + ofRow(started) + `
WHERE h.anchor IN (:names) AND h.term < CASE h.anchor :terms END AND (h.ended_at IS NULL OR h.ended_at > ` + ofRow(started) + `)`),
		Peek: [2]string{`SELECT term_floor, marked_at FROM ` + ftbl + ` WHERE 1 = 0`, `SELECT h.slot, h.ended, f.terms FROM ` + htbl + ` h, ` + ftbl + ` f WHERE 1 = 0`},
	}
}

// resume is the count a new floor row of election anchor (SQL) starts
// from: its history's newest slot plus one, 0 without a history.
func resume(htbl, anchor string) string {
	return `COALESCE((SELECT h.slot + 1 FROM ` + htbl + ` h WHERE h.anchor = ` + anchor + ` ORDER BY h.term DESC LIMIT 1), 0)`
}

// Tx is the transaction a Write runs its statements in: one
// connection, every statement (BEGIN and COMMIT included) under the
// caller's context (see InConnTx).
type Tx = *sql.Conn

// Write is a statement that may assign election's term, run by
// InTx in its transaction with the floor (0 when the election has no
// floor row) and first (it never existed: see firstElection). It returns the
// term the floor must be raised to (the term it wrote, or the row's), 0 for
// none.
type Write func(tx Tx, floor uint64, first bool) (term uint64, err error)

// InTx runs write in one transaction with election name's floor row:
// SELECT … FOR UPDATE, write, then the floor raised to the term write
// returns when it is above the floor (or the row is missing), COMMIT. The
// floor row's lock orders every term assignment of the election. Two
// candidates locking the same missing floor row (the election's first
// start) can deadlock on InnoDB's gap locks, and so can two first starts
// of neighbouring names, which both wait for the floor's marker
// (firstElection): the loser is tried once more, and then finds the
// winner's rows (mysqlerr.Retry).
func InTx(ctx context.Context, db stmt.Execer, f Stmts, name string, write Write) error {
	return mysqlerr.Retry(ctx, 2, func() error { return InTxOnce(ctx, db, f, name, write) })
}

// InConnTx runs body, which runs its statements on c, in one transaction:
// BEGIN, body and COMMIT, or ROLLBACK when body fails, every statement
// under ctx. db is a pool (*sql.DB) or one connection (*sql.Conn, the
// lock connection), nothing else; c is db itself (a *sql.Conn), or one of
// its connections, given back to the pool after. database/sql's Tx.Commit takes no context, and a COMMIT can
// wait for seconds (a Galera cluster stalls every commit until it evicts a
// dead node): a heartbeat, or a Batcher's renewal, must not. The library's
// transactions (InTx, a Batcher's renewal) all run so.
//
// A connection that cannot be rolled back (its context ended, or it broke)
// or whose COMMIT failed is discarded: never handed back to the pool with
// the transaction and its locks still open.
func InConnTx(ctx context.Context, db stmt.Execer, body func(c *sql.Conn) error) error {
	c, ok := db.(*sql.Conn)
	if !ok {
		var err error
		if c, err = db.(*sql.DB).Conn(ctx); err != nil {
			return err
		}
		defer c.Close() //nolint:errcheck // returned to the pool
	}
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	if err := body(c); err != nil {
		if ctx.Err() != nil {
			Discard(c)
		} else if _, rerr := c.ExecContext(ctx, "ROLLBACK AND NO CHAIN NO RELEASE"); rerr != nil {
			Discard(c)
		}
		return err
	}
	// NO CHAIN: with completion_type=CHAIN a plain COMMIT opens the next
	// transaction, and the statements after it on this connection (the
	// application's, or a renewal) would stay uncommitted. NO RELEASE:
	// with completion_type=RELEASE it would end the session.
	_, err := c.ExecContext(ctx, "COMMIT AND NO CHAIN NO RELEASE")
	if err != nil {
		Discard(c) // committed or not: the reply is lost
	}
	return err
}

// ExecCommitted runs pool with p, a write of the election's row, on a
// connection of db, and returns its affected rows. pool changes nothing
// on a session that would not commit it (commitsSQL: autocommit=0, or a
// transaction left open by COMMIT AND CHAIN); then conn, the same write, runs once more in
// a transaction of the library's (InConnTx), which commits whatever the
// session's mode. A statement that matches no row anyway costs that second
// try too: rare (the row is no longer the candidate's).
func ExecCommitted(ctx context.Context, db *sql.DB, pool, conn stmt.Stmt, p stmt.Params) (int64, error) {
	if n, err := pool.Affected(ctx, db, p); err != nil || n > 0 {
		return n, err
	}
	var n int64
	err := InConnTx(ctx, db, func(c *sql.Conn) (err error) {
		n, err = conn.Affected(ctx, c, p)
		return err
	})
	return n, err
}

// Discard closes c's driver connection: database/sql drops a connection
// whose Raw returns driver.ErrBadConn. Close c after, as always.
func Discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
}

// InTxOnce is InTx without the second try.
func InTxOnce(ctx context.Context, db stmt.Execer, f Stmts, name string, write Write) error {
	return InConnTx(ctx, db, func(c *sql.Conn) error { return Take(ctx, c, f, name, write, new(Marked)) })
}

// Marked is what a transaction learned of the floor's marker: its sum
// matched the floor rows (firstElection). It stays true until the
// transaction ends: the transaction holds the marker row's lock, which
// every new floor row's transaction waits for, and its own new floor rows
// add to the sum and the marker alike.
type Marked struct{ intact bool }

// Take is InTxOnce's work in a transaction the caller began on c (which
// may assign the terms of other elections too, each with its own Take, in
// an order of names that every such transaction keeps); m is the
// transaction's (new(Marked) at its start). Nothing may read the floor
// table without a lock in that transaction before the marker's lock is
// taken: the read would fix the transaction's snapshot, and the marker's
// sum (a plain read) would miss the floor rows others committed after it.
func Take(ctx context.Context, c *sql.Conn, f Stmts, name string, write Write, m *Marked) error {
	floor, missing, err := readFloor(ctx, c, f, name)
	if err != nil {
		return err
	}
	first := false
	if missing {
		if first, _, err = firstElection(ctx, c, f, m); err != nil {
			return err
		}
		// Read again under the marker's lock, which every transaction that
		// creates a floor row holds: the election's row, if any, got one
		// when the marker was written again, and under READ COMMITTED the
		// first read locked no gap, so another transaction may have created
		// it while this one waited for the marker
		// (TestTakeFirstUnderReadCommitted).
		if floor, missing, err = readFloor(ctx, c, f, name); err != nil {
			return err
		}
		first = first && missing
	}
	term, err := write(c, floor, first)
	if err != nil || term <= floor {
		return err
	}
	p := stmt.Params{Name: name, Term: term}
	if _, err := f.Raise.Exec(ctx, c, p); err != nil {
		return err
	}
	if missing { // a new floor row (the read's lock kept others from creating it)
		for _, s := range []stmt.Stmt{f.Count, f.Resume} {
			if _, err := s.Exec(ctx, c, p); err != nil {
				return err
			}
		}
	}
	return history(ctx, c, f, []string{name}, []uint64{term})
}

// history writes terms[i], which its transaction assigned to election
// names[i], into the history (f.Close, then f.Append).
func history(ctx context.Context, c *sql.Conn, f Stmts, names []string, terms []uint64) error {
	for _, s := range []string{f.Close, f.Append} {
		query, args := stmt.In(s, names, terms)
		if _, err := c.ExecContext(ctx, query, args...); err != nil {
			return err
		}
	}
	return nil
}

// ErrNoFloor is TakeAll's refusal of elections one of which has no floor
// row, when the caller did not lock the marker: their takes need the
// marker's check, which must come before any read.
var ErrNoFloor = errors.New("floor: an election has no floor row")

// WriteAll is TakeAll's write of many elections' terms: Write for each
// election names[i] of TakeAll, with floors[i] and firsts[i], returning
// terms[i].
type WriteAll func(tx Tx, floors []uint64, firsts []bool) (terms []uint64, err error)

// TakeAll is Take for many elections (names, each once, in the order every
// such transaction keeps) in the transaction the caller began on c, their
// terms written by write, set-based: one statement locks
// and reads their floor rows; the marker's check follows, once, when one
// has none; then write runs; then one statement raises the floors of
// those that had one and wrote a term above it, three create, count and
// resume those of the others that wrote a term, and one each writes their
// history (model/README.md, "Batched takes"). m is the transaction's when
// the caller locked the marker first (Take's rule for a first election),
// else nil: then ErrNoFloor, before any write, when a floor row is missing
// (an operator's DELETE since the caller counted them).
func TakeAll(ctx context.Context, c *sql.Conn, f Stmts, names []string, write WriteAll, m *Marked) error {
	floors, err := readAll(ctx, c, f, names)
	if err != nil {
		return err
	}
	first := false
	if len(floors) < len(names) {
		if m == nil {
			return ErrNoFloor
		}
		var marked bool
		if first, marked, err = firstElection(ctx, c, f, m); err != nil {
			return err
		}
		if marked { // the elections' rows, if any, got floor rows
			if floors, err = readAll(ctx, c, f, names); err != nil {
				return err
			}
		}
	}
	fls, firsts := make([]uint64, len(names)), make([]bool, len(names))
	for i, name := range names {
		fl, ok := floors[name]
		fls[i], firsts[i] = fl, first && !ok
	}
	written, err := write(c, fls, firsts)
	if err != nil {
		return err
	}
	var raised, created []string
	var terms, createdTerms []uint64
	for i, name := range names {
		fl, ok := floors[name]
		switch term := written[i]; {
		case term > fl && ok:
			raised, terms = append(raised, name), append(terms, term)
		case term > fl:
			created, createdTerms = append(created, name), append(createdTerms, term)
		}
	}
	if err := writeAll(ctx, c, f, raised, terms, created, createdTerms); err != nil || len(raised)+len(created) == 0 {
		return err
	}
	return history(ctx, c, f, append(raised, created...), append(terms, createdTerms...))
}

// writeAll raises the floor rows of elections raised to their terms, and
// creates, counts in the marker and resumes those of elections created at
// theirs (TakeAll); the raise and the creation must write every row.
func writeAll(ctx context.Context, c *sql.Conn, f Stmts, raised []string, terms []uint64, created []string, createdTerms []uint64) error {
	for _, s := range []struct {
		query string
		names []string
		terms []uint64
		want  int // affected rows, -1 for any
	}{
		{f.RaiseAll, raised, terms, len(raised)},
		{f.CreateAll, created, createdTerms, len(created)},
		{f.CountAll, created, nil, -1},
		{f.ResumeAll, created, nil, -1},
	} {
		if len(s.names) == 0 {
			continue
		}
		query, args := stmt.In(s.query, s.names, s.terms)
		res, err := c.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || s.want >= 0 && n != int64(s.want) {
			return cmp.Or(err, fmt.Errorf("floor: %d of %d floor rows written", n, s.want))
		}
	}
	return nil
}

// readAll locks the floor rows of elections names and reads them: a
// floor by name, none for a name that has no row.
func readAll(ctx context.Context, c *sql.Conn, f Stmts, names []string) (map[string]uint64, error) {
	floors := make(map[string]uint64, len(names))
	query, args := stmt.In(f.ReadAll, names, nil)
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var fl uint64
		if err := rows.Scan(&name, &fl); err != nil {
			return nil, err
		}
		if slices.Contains(names, name) {
			floors[name] = fl
		}
	}
	return floors, rows.Err()
}

// readFloor locks election name's floor row and reads it: missing when
// there is none (floor 0).
func readFloor(ctx context.Context, c *sql.Conn, f Stmts, name string) (floor uint64, missing bool, err error) {
	err = f.Read.QueryRow(ctx, c, stmt.Params{Name: name}).Scan(&floor)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, true, nil
	}
	return floor, false, err
}

// firstElection reports whether an election with no floor row never
// existed (first): the floor table's marker exists, its sum is the floor
// rows', and it was written at least the lock delay ago. A marker missing
// or wrong is written again (marked), after a floor row for every election
// row: first elections then wait their lock delay out for one lock delay.
func firstElection(ctx context.Context, c *sql.Conn, f Stmts, m *Marked) (first, marked bool, err error) {
	var want, sum uint64
	err = f.Marker.QueryRow(ctx, c, stmt.Params{}).Scan(&want, &first)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, false, err
	}
	found := err == nil
	if found && m.intact {
		return first, false, nil // summed earlier in this transaction
	}
	if err := f.Sum.QueryRow(ctx, c, stmt.Params{}).Scan(&sum); err != nil {
		return false, false, err
	}
	if m.intact = found && sum == want; m.intact {
		return first, false, nil
	}
	if _, err := f.Seed.Exec(ctx, c, stmt.Params{}); err != nil {
		return false, false, err
	}
	if err := f.Sum.QueryRow(ctx, c, stmt.Params{}).Scan(&sum); err != nil {
		return false, false, err
	}
	_, err = f.Mark.Exec(ctx, c, stmt.Params{Term: sum})
	m.intact = err == nil
	return false, true, err
}
