package election

import (
	"context"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/internal/ident"
)

// do runs f on the Run goroutine, between two steps of the campaign, and
// returns its error; what, when not empty, prefixes the ErrNotRunning do
// returns (Resign's is bare).
func (c *Candidate) do(ctx context.Context, what string, f func(ctx context.Context) error) error {
	reply := make(chan error, 1)
	if done := c.runDone.Load(); done != nil {
		select {
		case c.opCh <- func(ctx context.Context) { reply <- f(ctx) }:
			select {
			case err := <-reply:
				return err
			case <-ctx.Done():
				return ctx.Err() // f runs to its end on the Run goroutine all the same
			}
		case <-*done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if what == "" {
		return ErrNotRunning
	}
	return fmt.Errorf("election: %s: %w", what, ErrNotRunning)
}

// transferWindow returns how long a row handed over by a transfer stays
// reserved for its target, by the database clock, with a candidate's
// RetryInterval r: 2 × r (operator.TransferWindow says the same). A target that runs looks at the election at least
// every r × (1 + JitterFactor) even when no fast handover wakes it (it is
// woken at once otherwise), so it always looks within the window; a target
// that does not run costs the election this long, not a lease.
func transferWindow(r time.Duration) time.Duration { return 2 * r }

// Transfer implements Election.
func (c *Candidate) Transfer(ctx context.Context, to string) error {
	if err := ident.ID(to); err != nil {
		return fmt.Errorf("election: transfer: %w", err)
	}
	return c.do(ctx, "transfer", func(rctx context.Context) error {
		if c.st.phase != leading || !c.IsLeader() {
			return fmt.Errorf("election: transfer to %q: %w", to, ErrNotLeader)
		}
		if to != c.cfg.ID { // to itself, nothing to do: it leads already
			c.log.Info("transferring leadership", "term", c.st.hold, "to", to)
		}
		return c.handOver(rctx, to)
	})
}

// Proclaim implements Election.
func (c *Candidate) Proclaim(ctx context.Context, value string) error {
	if err := ident.Value(value); err != nil {
		return fmt.Errorf("election: proclaim: %w", err)
	}
	return c.do(ctx, "proclaim", func(rctx context.Context) error {
		if c.st.phase != leading || !c.IsLeader() {
			return fmt.Errorf("election: proclaim: %w", ErrNotLeader)
		}
		if value == c.b.base().value {
			return nil
		}
		c.b.base().value = value // published from now on (in takes and renewals)
		c.step()
		qctx, cancel := context.WithTimeout(context.WithoutCancel(rctx), min(c.cfg.QueryTimeout, c.st.holdDeadline.Sub(c.cfg.Clock.Now())))
		held, err := c.b.writeRow(qctx, writeProclaim, c.b.base().params(c.st.hold))
		cancel()
		switch {
		case err != nil:
			c.cfg.Metrics.Heartbeat(c.cfg.Name, 0, err)
			return fmt.Errorf("election: proclaim: %w", err)
		case !held:
			// Deposed meanwhile: the next renewal stands it down.
			return fmt.Errorf("election: proclaim: the row no longer names this term: %w", ErrNotLeader)
		}
		r := c.st.seen
		r.Value = value
		c.observe(r)
		return nil
	})
}
