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

// The basic use: campaign until the process is told to stop, do leader-only
// work while elected, and hand over at once on shutdown.
func Example() {
	db, err := sql.Open("mysql", os.Getenv("SQLELECT_DSN")) // yours: the library never opens or closes it
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	e, err := election.NewTable(db, election.Config{
		Name:  "orders-scheduler",
		Value: "10.0.0.7:8080", // published for whoever asks who leads
		Callbacks: election.Callbacks{
			OnElected: func(ctx context.Context, l election.Leadership) {
				// Leader-only work; ctx ends when leadership does.
				for ctx.Err() == nil {
					log.Printf("leading term %d", l.Term)
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			},
			OnDemoted: func(d election.Demotion) { log.Printf("term %d ended: %s", d.Term, d.Reason) },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := e.Run(ctx); err != nil { // resigns on the way out
		log.Fatal(err)
	}
}

// Ask who leads, from any candidate or with Status from anywhere.
func ExampleElection_Leader() {
	var e election.Election // from NewTable or NewLock
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := e.Leader(ctx)
	switch {
	case errors.Is(err, election.ErrNoLeader):
		fmt.Println("nobody leads")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("%s leads term %d since %s at %s (lease left %s)\n", r.ID, r.Term, r.Since, r.Value, r.LeaseLeft)
	}
}

// Check leadership cheaply before leader-only work; it turns false by the
// local clock the moment the lease could have run out.
func ExampleElection_IsLeader() {
	var e election.Election
	if e.IsLeader() {
		fmt.Println("do leader-only work, tagged with term", e.Term())
	}
}
