package election

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A Resign, Transfer or Proclaim that finds Run running, but past its last
// wait (here Run's context ended and it stands down, waiting for OnElected
// to return), is never served: once Run returned it fails with
// ErrNotRunning, even with a context that never ends, instead of waiting
// for a Run goroutine that is gone.
func TestCallsRacingRunsReturnGetNotRunning(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(c *Candidate, ctx context.Context) error
	}{
		{"Resign", func(c *Candidate, ctx context.Context) error { return c.Resign(ctx) }},
		{"Transfer", func(c *Candidate, ctx context.Context) error { return c.Transfer(ctx, "other") }},
		{"Proclaim", func(c *Candidate, ctx context.Context) error { return c.Proclaim(ctx, "new value") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				b := &fakeBackend{followB: beat{held: true, term: 5}}
				h := newHarness(t, b, func(c *Config) {
					c.Callbacks.OnElected = func(ctx context.Context, _ Leadership) {
						<-ctx.Done()
						<-release // Run's stand-down waits for this
					}
				})
				synctest.Wait()
				if !h.c.IsLeader() {
					t.Fatal("not leading")
				}
				h.cancel()
				synctest.Wait() // Run stands down, blocked in OnElected
				got := make(chan error, 1)
				go func() { got <- tc.call(h.c, context.Background()) }()
				synctest.Wait() // the call found Run running and waits for it
				if h.c.runDone.Load() == nil {
					t.Fatal("Run returned before the call was made")
				}
				close(release) // Run returns without serving the call
				select {
				case err := <-got:
					if !errors.Is(err, ErrNotRunning) {
						t.Fatalf("%s as Run returned = %v, want ErrNotRunning", tc.name, err)
					}
				case <-time.After(time.Hour):
					t.Fatalf("%s still waits an hour after Run returned", tc.name)
				}
			})
		})
	}
}
