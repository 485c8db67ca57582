package election_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

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
				return nil // write with tx, tagged with l.Term (the fake's tx is nil without SetDB)
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
