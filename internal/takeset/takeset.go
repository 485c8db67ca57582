// Package takeset runs package election's batches of heartbeats that may
// assign terms (a Batcher's takes) in one term floor's transaction each,
// with one heartbeat statement for a batch's elections, and tells each
// what its own heartbeat's reply would have (model/README.md, "Batched
// takes" and "One heartbeat statement for a batch"). The statements'
// texts are election's (sql.go) and internal/floor's.
package takeset

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sqlelect/sqlelect/internal/combine"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Req is an election's heartbeat in the term floor's transaction: its
// floor's statements, the heartbeat alone, and its parameters but the
// floor's (Floor, First, which the take sets); Ctx is its caller's: one
// that gave up is left out. What it did goes into Did before Exec returns.
type Req struct {
	Ctx       context.Context
	F         floor.Stmts
	Heartbeat stmt.Stmt
	P         stmt.Params
	NoFirst   bool // no insert is a first (an adoption period)
	Did       *Did
}

// Did is what a heartbeat did, as its reply tells: its affected rows (1
// for an insert, 2 for a change, 0 for none), and the row's term after it
// (LAST_INSERT_ID); Sent, that the transaction that committed sent it
// (not one that failed and was tried again).
type Did struct {
	N, Term int64
	Sent    bool
}

// Stmts are a batch's statements on the election table Table. Floors
// counts the floor rows of elections :names. Lock locks and reads the
// rows of :names before the heartbeats; Heartbeats sends the heartbeats
// of one candidate (:me) in elections :rows (probe.HeartbeatAllSQL); Read
// reads the rows of :names after them, only on a session whose clock is
// trusted (dbclock.Trusted). Lock and Read select anchor, service_id,
// term, acquired, released <> 0 and transfer_to IS NOT NULL, then the
// row's other columns: a row changed when any of them did.
type Stmts struct {
	Table, Floors, Lock, Read string
	Heartbeats                stmt.Stmt
}

// ErrUntrusted is a batch's error when a row is missing after its
// heartbeats: the session's clock is not trusted, and they changed
// nothing.
var ErrUntrusted = errors.New("takeset: a row is missing after the heartbeats: the session's clock is not trusted")

// One runs r's heartbeat alone in tx, with the election's floor, and
// returns the term the floor must be raised to: the row's, new or not (a
// row no candidate of this version wrote, an earlier version's, gets its
// floor too).
func (r Req) One(ctx context.Context, tx floor.Tx, fl uint64, first bool) (uint64, error) {
	p := r.P
	p.Floor, p.First = fl, first && !r.NoFirst
	res, err := r.Heartbeat.Exec(ctx, tx, p)
	if err != nil {
		return 0, err
	}
	if r.Did.N, err = res.RowsAffected(); err != nil {
		return 0, err
	}
	r.Did.Term, _ = res.LastInsertId()
	r.Did.Sent = true
	return uint64(max(r.Did.Term, 0)), nil
}

// in is r's heartbeat with its statements under ctx, as floor.Take runs
// it; nothing once r's caller gave up: it would not learn the outcome.
func (r Req) in(ctx context.Context) floor.Write {
	return func(tx floor.Tx, fl uint64, first bool) (uint64, error) {
		if r.Ctx.Err() != nil {
			*r.Did = Did{} // not sent (a failed attempt's was rolled back)
			return 0, nil
		}
		return r.One(ctx, tx, fl, first)
	}
}

// Exec runs a batch of heartbeats reqs on db that may assign terms in one term
// floor's transaction (floor.TakeAll, or floor.Take each when an election
// is in it twice; tried once more after a deadlock or a write conflict, as
// floor.InTx), in the order of their names, by the earliest of their
// callers' deadlines; those whose callers gave up are left out. When one
// of their elections has no floor row yet (a first election), the floor's
// marker row is locked first: such batches run one at a time, none holds
// a gap lock while it waits for the marker, so that they do not deadlock,
// and one reading of the marker's sum serves a batch's first elections
// (floor.Marked), where every first election read the whole floor table.
// Set-based, the batch sends one locking read of its floor rows, the
// heartbeats, and one statement each to raise, create, count and resume
// floor rows and to close and append the history. One heartbeat alone
// runs as without a Batcher (floor.InTx), and its error is its result, as
// it is when the marker's lock could not be had (no heartbeat was sent:
// each is tried again at its next step). A batch that failed after that
// fails every heartbeat in it, which each then sends alone
// (election's tableBackend.beat): one row locked elsewhere holds up the others once.
func Exec(ctx context.Context, db *sql.DB, s Stmts, reqs []Req) ([]error, error) {
	out := make([]error, len(reqs))
	// Each heartbeat still waited for fails with err: none was sent.
	unsent := func(err error) ([]error, error) {
		for i := range out {
			out[i] = cmp.Or(out[i], err)
		}
		return out, nil
	}
	var live []Req
	var names []string
	var ctxs []context.Context
	for i, r := range reqs {
		if out[i] = r.Ctx.Err(); out[i] == nil {
			live, names, ctxs = append(live, r), append(names, r.P.Name), append(ctxs, r.Ctx)
		}
	}
	if len(live) == 0 {
		return out, nil
	}
	ctx, cancel := combine.ByEarliest(ctx, ctxs)
	defer cancel()
	switch len(live) {
	case 1: // alone: its error is its result
		r := live[0]
		err := floor.InTx(ctx, db, r.F, r.P.Name, r.in(ctx))
		if err == nil && !r.Did.Sent {
			err = cmp.Or(r.Ctx.Err(), context.Canceled)
		}
		return unsent(err)
	}
	slices.SortStableFunc(live, func(x, y Req) int { return strings.Compare(x.P.Name, y.P.Name) })
	slices.Sort(names)
	names = slices.Compact(names)
	// How many have a floor row, read before the transaction begins: a
	// read in it would fix its snapshot before the marker's lock, and its
	// sum of the floor rows (floor.Take) would miss those that others
	// committed meanwhile.
	var floors int
	query, args := stmt.In(s.Floors, names, nil)
	if err := db.QueryRowContext(ctx, query, args...).Scan(&floors); err != nil {
		return unsent(probe.Classify(err, s.Table))
	}
	// Each election once: set-based (floor.TakeAll).
	set := len(names) == len(live)
	sent, err := takeAll(ctx, db, s, live, floors < len(names), set)
	if errors.Is(err, floor.ErrNoFloor) { // deleted meanwhile: nothing was written
		sent, err = takeAll(ctx, db, s, live, true, set)
	}
	if err != nil && !sent {
		return unsent(err)
	}
	for i, r := range reqs {
		if out[i] == nil && err == nil && !r.Did.Sent { // its caller gave up before the attempt that committed
			out[i] = cmp.Or(r.Ctx.Err(), context.Canceled)
		}
	}
	return out, err
}

// takeAll runs live's heartbeats in one term floor's transaction, in
// their order, after it locked the floor's marker if marker, and tries
// once more after a deadlock or a write conflict (as floor.InTx): with
// floor.TakeAll and takeSet if set (the elections differ), else with
// floor.Take each.
// sent says that it may have sent a heartbeat before it failed: false while
// it waited for the marker, or when it found a floor row missing without
// it; true after (a failed read of the floor rows too).
func takeAll(ctx context.Context, db *sql.DB, s Stmts, live []Req, marker, set bool) (sent bool, err error) {
	err = mysqlerr.Retry(ctx, 2, func() error {
		for _, r := range live {
			*r.Did = Did{} // what a failed attempt did was rolled back
		}
		return floor.InConnTx(ctx, db, func(c *sql.Conn) error {
			if sent = false; marker {
				if err := live[0].F.Marker.QueryRow(ctx, c, stmt.Params{}).Scan(new(uint64), new(bool)); err != nil && !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			if set {
				names := make([]string, len(live))
				for i, r := range live {
					names[i] = r.P.Name
				}
				var m *floor.Marked
				if marker {
					m = new(floor.Marked)
				}
				err := floor.TakeAll(ctx, c, live[0].F, names, func(tx floor.Tx, floors []uint64, firsts []bool) ([]uint64, error) {
					return takeSet(ctx, tx, s, live, floors, firsts)
				}, m)
				sent = !errors.Is(err, floor.ErrNoFloor)
				return err
			}
			sent = true
			m := new(floor.Marked)
			for _, r := range live {
				if r.Ctx.Err() != nil {
					continue // its caller gave up (see in)
				}
				if err := floor.Take(ctx, c, r.F, r.P.Name, r.in(ctx), m); err != nil {
					return err
				}
			}
			return nil
		})
	})
	return sent, err
}

// takeSet runs the heartbeats of live (distinct elections, in the order
// of their names) with their floors and firsts (floor.TakeAll's write) in
// the transaction on c, set-based (run), and returns the
// terms their floors must be raised to: 0 for a heartbeat whose caller
// gave up (see Req.in), which is left out. A session whose clock is
// not trusted fails the batch (ErrUntrusted): each then sends its
// heartbeat alone, which reports it.
func takeSet(ctx context.Context, c *sql.Conn, s Stmts, live []Req, floors []uint64, firsts []bool) ([]uint64, error) {
	var sent []int
	var reqs []stmt.Params
	for i, r := range live {
		if r.Ctx.Err() == nil {
			p := r.P
			p.Floor, p.First = floors[i], firsts[i] && !r.NoFirst
			sent, reqs = append(sent, i), append(reqs, p)
		}
	}
	terms := make([]uint64, len(live))
	if len(reqs) == 0 {
		return terms, nil
	}
	did, err := run(ctx, c, s, reqs)
	if err != nil {
		return nil, err
	}
	for k, i := range sent {
		*live[i].Did, terms[i] = did[k], uint64(max(did[k].Term, 0))
	}
	return terms, nil
}

// run sends the heartbeats reqs (each an election's parameters, Floor and
// First set; no election twice) in the transaction on c: one statement
// locks and reads their rows, one heartbeat statement runs for each
// candidate ID among them (a process's Batcher has one), and one reads the
// rows again. It returns what each did (see affected), or an error, which
// ErrUntrusted is when the session's clock is not trusted.
func run(ctx context.Context, c *sql.Conn, s Stmts, reqs []stmt.Params) ([]Did, error) {
	names := make([]string, len(reqs))
	var ids []string
	byID := map[string][]stmt.Params{}
	for i, p := range reqs {
		if byID[p.Me] == nil {
			ids = append(ids, p.Me)
		}
		byID[p.Me], names[i] = append(byID[p.Me], p), p.Name
	}
	before, err := read(ctx, c, s.Lock, names)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, err := s.Heartbeats.Exec(ctx, c, stmt.Params{Me: id, Rows: byID[id]}); err != nil {
			return nil, err
		}
	}
	after, err := read(ctx, c, s.Read, names)
	if err != nil {
		return nil, err
	}
	did := make([]Did, len(reqs))
	for i, p := range reqs {
		a, ok := after[p.Name]
		if !ok {
			return nil, fmt.Errorf("%w (election %s)", ErrUntrusted, p.Name)
		}
		b, had := before[p.Name]
		did[i] = Did{N: affected(b, had, a, p.Me), Term: a.term, Sent: true}
	}
	return did, nil
}

// row is an election's row as Lock and Read select it.
type row struct {
	id, acquired       string
	term               int64
	released, transfer bool
	all                []sql.NullString // every column
}

// read reads the rows of elections names with query on c, by name.
func read(ctx context.Context, c *sql.Conn, query string, names []string) (map[string]row, error) {
	q, args := stmt.In(query, names, nil)
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := make(map[string]row, len(names))
	for rows.Next() {
		vals, ptrs := make([]sql.NullString, len(cols)), make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := row{id: vals[1].String, acquired: vals[3].String, released: vals[4].String == "1", transfer: vals[5].String == "1", all: vals}
		if r.term, err = strconv.ParseInt(vals[2].String, 10, 64); err != nil {
			return nil, err
		}
		out[vals[0].String] = r
	}
	return out, rows.Err()
}

// affected is what the affected rows of a heartbeat of candidate me would
// have said, from its row before it (had: there was one) and after it,
// each read under the row's lock in its transaction: 2 when the row
// changed, 0 when not; for a row that was missing, 1 when it now holds
// what the insert writes, else 0 (one an operator inserted meanwhile,
// which no gap lock kept out under READ COMMITTED, and the heartbeat then
// found: the cautious answer).
func affected(before row, had bool, after row, me string) int64 {
	switch {
	case had && !slices.Equal(before.all, after.all):
		return 2
	case had:
		return 0
	case after.id == me && (after.acquired == "first" || after.acquired == "insert") && !after.released && !after.transfer:
		return 1
	}
	return 0
}
