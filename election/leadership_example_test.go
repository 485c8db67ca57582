package election_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionfake"
)

// Fence leader-only writes with the Leadership OnElected receives: its
// writes commit only while that leadership lasts, and no reference to the
// Election is needed. Here the in-memory fake stands in for NewTable.
func ExampleLeadership_Fenced() {
	done := make(chan struct{})
	f, err := electionfake.New(election.Config{Name: "jobs", ID: "a", Callbacks: election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) {
			defer close(done)
			err := l.Fenced(ctx, func(tx *sql.Tx) error {
				return nil // write with tx, tagged with l.Term (the fake's tx is nil)
			})
			fmt.Println("term", l.Term, "fenced write:", err)
		}}})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = f.Run(ctx) }()
	if _, err := f.Elect(ctx); err != nil {
		log.Fatal(err)
	}
	<-done
	// Output: term 1 fenced write: <nil>
}

// From sqlx, wrap the transaction with the DB's Mapper: sqlx's Named
// methods panic without one.
func ExampleLeadership_Fenced_sqlx() {
	db, done := exampleDB()
	defer done()
	sdb := sqlx.NewDb(db, "mysql") // the application's sqlx handle on the same pool
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sdb.MustExecContext(ctx, "CREATE TABLE jobs (term BIGINT UNSIGNED NOT NULL, job TEXT)")

	type job struct {
		Term uint64 `db:"term"`
		Job  string `db:"job"`
	}
	wrote := make(chan error, 1)
	e, err := election.NewTable(db, election.Config{Name: "orders-scheduler", Callbacks: election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) {
			wrote <- l.Fenced(ctx, func(tx *sql.Tx) error {
				stx := &sqlx.Tx{Tx: tx, Mapper: sdb.Mapper}
				_, err := stx.NamedExecContext(ctx, "INSERT INTO jobs (term, job) VALUES (:term, :job)", job{l.Term, "nightly report"})
				return err
			})
		}}})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()
	fmt.Println("fenced write:", <-wrote)
	stop()
	fmt.Println("run:", <-ran)
	// Output:
	// fenced write: <nil>
	// run: <nil>
}
