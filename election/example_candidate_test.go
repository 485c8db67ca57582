package election_test

import (
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/examplefake"
)

// Check leadership before each leader-only step: no database call, and it
// turns false by the local clock the moment the lease could have run out.
func ExampleCandidate_IsLeader() {
	_, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1"}) // NewTable's; here a fake
	defer stop()
	if e.IsLeader() {
		fmt.Println("web-1 does leader-only work")
	}
	// Output: web-1 does leader-only work
}

// Tag what leaves MySQL with the term, a fencing token: every later
// leadership has a higher one, so a receiver can refuse a deposed leader's
// late request.
func ExampleCandidate_Term() {
	_, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1"})
	defer stop()
	if t := e.Term(); t != 0 { // 0: not leading
		fmt.Printf("PUT /jobs/42?fencing-token=%d\n", t)
	}
	// Output: PUT /jobs/42?fencing-token=1
}

// Ask the database who leads, from any candidate.
func ExampleCandidate_Leader() {
	ctx, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1", Value: "10.0.0.7:8080"})
	defer stop()
	r, err := e.Leader(ctx)
	switch {
	case errors.Is(err, election.ErrNoLeader):
		fmt.Println("nobody leads")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("%s leads term %d at %s\n", r.ID, r.Term, r.Value)
	}
	// Output: web-1 leads term 1 at 10.0.0.7:8080
}

// Resign hands leadership over at once instead of after a lease, for a
// leader that is about to stop or knows it cannot do the work.
func ExampleCandidate_Resign() {
	ctx, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1", Callbacks: election.Callbacks{
		OnDemoted: func(d election.Demotion) { fmt.Println("demoted:", d.Reason) }}})
	defer stop()
	if err := e.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	_, err := e.Leader(ctx)
	fmt.Println("leads:", e.IsLeader(), "nobody leads:", errors.Is(err, election.ErrNoLeader))
	// Output:
	// demoted: resigned
	// leads: false nobody leads: true
}

// Transfer hands leadership to a given candidate, which leads at once, for a
// rolling restart that moves the leader off the node that restarts next.
func ExampleCandidate_Transfer() {
	ctx, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1", Callbacks: election.Callbacks{
		OnDemoted: func(d election.Demotion) { fmt.Println("demoted:", d.Reason) }}})
	defer stop()
	if err := e.Transfer(ctx, "web-2"); err != nil {
		log.Fatal(err)
	}
	r, err := e.Leader(ctx)
	fmt.Println("leader:", r.ID, err)
	// Output:
	// demoted: transferred
	// leader: web-2 <nil>
}

// Proclaim changes the value the leader publishes (Config.Value), without a
// re-election: here, the address it serves on after a port change.
func ExampleCandidate_Proclaim() {
	ctx, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1", Value: "10.0.0.7:8080"})
	defer stop()
	if err := e.Proclaim(ctx, "10.0.0.7:9090"); err != nil {
		log.Fatal(err)
	}
	r, _ := e.Leader(ctx)
	fmt.Println("term", r.Term, "at", r.Value)
	// Output: term 1 at 10.0.0.7:9090
}

// Fenced runs a transaction that commits only while this candidate leads
// with its current term. From OnElected, use the Leadership's Fenced
// instead (see Leadership.Fenced).
func ExampleCandidate_Fenced() {
	ctx, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1"})
	defer stop()
	write := func(tx *sql.Tx) error { return nil } // INSERT … with tx (the fake's tx is nil)
	fmt.Println("while leading:", e.Fenced(ctx, write))
	if err := e.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("not leader:", errors.Is(e.Fenced(ctx, write), election.ErrNotLeader))
	// Output:
	// while leading: <nil>
	// not leader: true
}
