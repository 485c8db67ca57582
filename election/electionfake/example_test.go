package electionfake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionfake"
)

// Example drives a fake through a leadership as a unit test of code that
// runs a job while it leads would: elected, a fenced write that fails, a
// takeover by another candidate.
func Example() {
	jobs := make(chan string, 4)
	cfg := election.Config{
		Name: "billing",
		ID:   "node-1",
		Callbacks: election.Callbacks{
			// The code under test: work while leading, stop when told.
			OnElected: func(ctx context.Context, l election.Leadership) {
				term := l.Term
				jobs <- fmt.Sprintf("started (term %d)", term)
				<-ctx.Done()
				jobs <- "stopped"
			},
			OnDemoted: func(d election.Demotion) { jobs <- "demoted: " + string(d.Reason) },
			OnLeaderChanged: func(r election.Record) {
				if r.ID != "node-1" {
					jobs <- "leader is now " + r.ID
				}
			},
		},
	}
	f, err := electionfake.New(cfg)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()

	// The test makes this candidate leader...
	if _, err := f.Elect(ctx); err != nil {
		panic(err)
	}
	fmt.Println(<-jobs, f.IsLeader())

	// ...makes its fenced writes fail as a deposed leader's would...
	f.FailFenced(fmt.Errorf("%w: fake", election.ErrNotLeader))
	err = f.Fenced(ctx, nil)
	fmt.Println("fenced:", errors.Is(err, election.ErrNotLeader))

	// ...and hands the election to another candidate.
	if _, err := f.SetLeader(ctx, "node-2"); err != nil {
		panic(err)
	}
	fmt.Println(<-jobs)
	fmt.Println(<-jobs)
	fmt.Println(<-jobs)
	fmt.Println("leader:", f.IsLeader())

	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output:
	// started (term 1) true
	// fenced: true
	// stopped
	// demoted: deposed
	// leader is now node-2
	// leader: false
}
