package election_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// The main path, on a throwaway database: campaign, lead, write fenced by the
// leadership's term, and resign so that another replica leads at once.
func Example() {
	db, done := exampleDB() // your *sql.DB (here a throwaway database): the library never opens or closes it
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE TABLE jobs (term BIGINT UNSIGNED NOT NULL, job TEXT)"); err != nil {
		log.Fatal(err)
	}

	wrote := make(chan struct{})
	e, err := election.NewTable(db, election.Config{
		Name: "orders-scheduler",
		Callbacks: election.Callbacks{
			OnElected: func(ctx context.Context, l election.Leadership) {
				// Leader-only work; ctx ends when this leadership does, and
				// l.Fenced commits only while it lasts.
				err := l.Fenced(ctx, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO jobs (term, job) VALUES (?, 'nightly report')", l.Term)
					return err
				})
				fmt.Println("elected; fenced write:", err)
				close(wrote)
				<-ctx.Done()
			},
			OnDemoted: func(d election.Demotion) { fmt.Println("demoted:", d.Reason) },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()

	<-wrote
	if err := e.Resign(ctx); err != nil { // hand over now, not after a lease
		log.Fatal(err)
	}
	stop()
	fmt.Println("run:", <-ran)
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs written:", n)
	// Output:
	// elected; fenced write: <nil>
	// demoted: resigned
	// run: <nil>
	// jobs written: 1
}

// A service's whole life: campaign until the process is told to stop, then
// resign on the way out so that another replica leads at once.
func ExampleNewTable() {
	db, err := sql.Open("mysql", os.Getenv("SQLELECT_DSN")) // yours: the library never opens or closes it
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	e, err := election.NewTable(db, election.Config{
		Name:  "orders-scheduler",
		Value: "10.0.0.7:8080", // published for whoever asks who leads
		Callbacks: election.Callbacks{
			OnElected: func(ctx context.Context, l election.Leadership) { runScheduler(ctx, l) },
			OnDemoted: func(d election.Demotion) { log.Printf("term %d ended: %s", d.Term, d.Reason) },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := e.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// runScheduler is the leader-only work of the examples: it runs until its
// context ends, and writes only through l.Fenced.
func runScheduler(ctx context.Context, l election.Leadership) {
	for ctx.Err() == nil {
		_ = l.Fenced(ctx, func(tx *sql.Tx) error { return nil /* this minute's jobs, tagged with l.Term */ })
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
	}
}

// The GET_LOCK backend takes the same arguments; it holds a dedicated
// connection of db while it campaigns, and needs no row of its own to lead.
func ExampleNewLock() {
	db, done := exampleDB()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	elected := make(chan uint64, 1)
	e, err := election.NewLock(db, election.Config{
		Name:      "orders-scheduler",
		Callbacks: election.Callbacks{OnElected: func(_ context.Context, l election.Leadership) { elected <- l.Term }},
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()
	fmt.Println("leads:", <-elected == e.Term() && e.IsLeader())
	stop() // Run resigns on the way out
	fmt.Println("run:", <-ran, "leads:", e.IsLeader())
	// Output:
	// leads: true
	// run: <nil> leads: false
}

// Run returns nil once its context ends (after resigning), and an error only
// for what retrying cannot fix, such as a database not migrated yet;
// database errors while it runs are retried.
func ExampleCandidate_Run() {
	db, done := exampleEmptyDB() // no election table
	defer done()
	e, err := election.NewTable(db, election.Config{Name: "orders-scheduler"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = e.Run(ctx)
	switch {
	case errors.Is(err, election.ErrTableMissing), errors.Is(err, election.ErrSchemaMismatch):
		fmt.Println("run `sqlelect migrate up` first")
	case errors.Is(err, election.ErrAccessDenied):
		fmt.Println("grant SELECT, INSERT, UPDATE on the election tables")
	case err != nil:
		log.Fatal(err)
	}
	// Output: run `sqlelect migrate up` first
}
