// Package examplefake starts the in-memory fake (electionfake), leading,
// for the Examples whose point is the API, not the database: package
// election's and electionhttp's. It is test support, as internal/testdb
// is, not part of the library.
package examplefake

import (
	"context"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionfake"
)

// Leading returns a candidate of the election cfg names that leads, a
// context for its calls (ended by a deadline or stop), and a function that
// stops it (Run resigns on the way out): the in-memory fake, standing in
// for NewTable's *election.Candidate. It panics on an error, as an Example
// has no *testing.T to report it to.
func Leading(cfg election.Config) (ctx context.Context, f *electionfake.Fake, stop func()) {
	f, err := electionfake.New(cfg)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ran := make(chan error, 1)
	go func() { ran <- f.Run(ctx) }()
	if _, err := f.Elect(ctx); err != nil {
		panic(err)
	}
	return ctx, f, func() {
		cancel()
		if err := <-ran; err != nil {
			panic(err)
		}
	}
}
