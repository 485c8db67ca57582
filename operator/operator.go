// Package operator holds an operator's actions on the elections of one
// table: reading them (Status, List, Observe) and changing who leads
// (Assume, Reelect, Transfer, StepDown). Candidates run package election;
// the CLI, sqlelect, runs these.
//
//	op, err := operator.New(db, "") // election.DefaultTable
//	rec, err := op.Status(ctx, "orders")
//
// Each action is a single statement (Assume: a transaction), bounded by
// ctx; the plain SQL each stands for is in its documentation.
package operator

import (
	"cmp"
	"context"
	"database/sql"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Operator acts on the elections of one table. It is safe for concurrent
// use; the caller owns db, and Operator never closes it.
type Operator struct {
	db    *sql.DB
	table string // validated
}

// New returns an Operator of the elections in table, election.DefaultTable
// when empty. It fails, wrapping election.ErrInvalidConfig, when table is
// not a valid name, and with election.ErrNilDB when db is nil.
func New(db *sql.DB, table string) (*Operator, error) {
	table = cmp.Or(table, election.DefaultTable)
	if err := ident.Table(table); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, election.ErrNilDB
	}
	return &Operator{db: db, table: table}, nil
}

// Table returns the table the Operator acts on.
func (o *Operator) Table() string { return o.table }

// TransferWindow returns how long a row handed over by a transfer stays
// reserved for its target, by the database clock, with a candidate's
// RetryInterval r: 2 × r. A target that runs looks at the election at least
// every r × (1 + JitterFactor) even when no fast handover wakes it (it is
// woken at once otherwise), so it always looks within the window; a target
// that does not run costs the election this long, not a lease.
func TransferWindow(r time.Duration) time.Duration { return 2 * r }

// Status reads election name's record, whatever its state; it returns an
// error wrapping election.ErrNoSuchElection when the election has no row,
// and the record with an error wrapping election.ErrNoLiveLease when the
// row holds no live lease (both match election.ErrNoLeader).
func (o *Operator) Status(ctx context.Context, name string) (election.Record, error) {
	return election.ReadRecord(ctx, o.db, o.table, name)
}

// List reads every election's record, ordered by name, live or not.
func (o *Operator) List(ctx context.Context) ([]election.Record, error) {
	return election.ReadRecords(ctx, o.db, o.table)
}

// defaultQueryTimeout bounds an operator's statement when ctx has no
// deadline: election's default Config.Tuning.QueryTimeout.
const defaultQueryTimeout = 5 * time.Second

// retry runs body, with the bound for an operator's statement (the time
// left before ctx's deadline, defaultQueryTimeout without one; reading the
// server's version for it costs one round trip), and runs it again on
// write conflicts (up to three tries in all, mysqlerr.Retry: every action
// reads what it needs afresh). A server error wraps the election sentinel
// that names its cause, naming the table, as the election's own statements
// do (probe.Classify).
func (o *Operator) retry(ctx context.Context, body func(stmt.Bound) error) error {
	d := defaultQueryTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	bound, err := stmt.DetectBound(ctx, o.db, d)
	if err != nil {
		return err
	}
	return probe.Classify(mysqlerr.Retry(ctx, 3, func() error { return body(bound) }), o.table)
}

// exec runs the action's statement, text with named parameters taken from
// p (see retry), and returns the rows affected.
func (o *Operator) exec(ctx context.Context, text string, p stmt.Params) (affected int64, err error) {
	err = o.retry(ctx, func(bound stmt.Bound) (err error) {
		affected, err = bound.Stmt(text).Affected(ctx, o.db, p)
		return err
	})
	return affected, err
}
