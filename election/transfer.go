package election

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// op is a request run on the Run goroutine (Transfer, Proclaim), which owns
// the campaign's state.
type op struct {
	run   func(ctx context.Context) error // given Run's context
	reply chan error
}

// do runs f on the Run goroutine, between two steps of the campaign, and
// returns its error; what wraps the errors of do itself.
func (c *candidate) do(ctx context.Context, what string, f func(ctx context.Context) error) error {
	if !c.running.Load() {
		return fmt.Errorf("election: %s: %w", what, ErrNotRunning)
	}
	o := op{run: f, reply: make(chan error, 1)}
	select {
	case c.opCh <- o:
	case <-c.stopped():
		return fmt.Errorf("election: %s: %w", what, ErrNotRunning)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-o.reply:
		return err
	case <-ctx.Done():
		// The op runs to its end on the Run goroutine all the same.
		return ctx.Err()
	}
}

// TransferWindow returns how long a row handed over by a transfer stays
// reserved for its target, by the database clock, with a candidate's
// RetryInterval r: 2 × r. A target that runs looks at the election at least
// every r × (1 + JitterFactor) even when no fast handover wakes it (it is
// woken at once otherwise), so it always looks within the window; a target
// that does not run costs the election this long, not a lease.
func TransferWindow(r time.Duration) time.Duration { return 2 * r }

// Transfer implements Election.
func (c *candidate) Transfer(ctx context.Context, to string) error {
	if err := ValidateID(to); err != nil {
		return fmt.Errorf("election: transfer: %w", err)
	}
	return c.do(ctx, "transfer", func(rctx context.Context) error {
		if !c.leading || !c.IsLeader() {
			return fmt.Errorf("election: transfer to %q: %w", to, ErrNotLeader)
		}
		if to == c.cfg.ID {
			return nil // it leads already
		}
		c.log.Info("transferring leadership", "term", c.hold, "to", to)
		return c.handOver(rctx, to)
	})
}

// handOver stands the holder down and hands the row over for a planned
// change of leader (Transfer, or an operator's request seen by a renewal):
// to candidate to, or to anyone when to is empty. A leader demotes first
// (ReasonTransferred), then marks the row released and reserved for to for
// the transfer window, and wakes the followers: to takes over at once and
// without a lock delay, since the holder stood down before the row said so.
// A holder that does not lead yet (it waits out its lock delay, which it
// cannot hand on to a taker that would not wait) gives the row up as Resign
// does, with the rest of its delay: anyone may take it when that ends. A
// request to hand over to itself is cleared (the row is handed to itself:
// the holder renews at once and keeps leading). The holder then sits out
// two retry intervals, after the transfer window when it named a target. An error of the hand-over statement is logged,
// counted and returned: the row then expires after its lease.
func (c *candidate) handOver(ctx context.Context, to string) error {
	now := c.cfg.Clock.Now()
	if c.hold == 0 {
		return nil
	}
	if to == c.cfg.ID || now.Before(c.leadAt) {
		// Not a change of leader: a transfer to itself (cleared by the
		// next renewal, which the caller runs at once) or a holder still
		// waiting out its lock delay (which it hands on).
		if to != c.cfg.ID {
			c.standDown(ctx, ReasonTransferred, true)
			c.sitOut()
		}
		return nil
	}
	c.demote(ReasonTransferred)
	var err error
	if now = c.cfg.Clock.Now(); now.Before(c.holdDeadline) {
		c.step()
		rctx, cancel := c.queryContext(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
		err = c.b.handOver(rctx, c.hold, to, TransferWindow(c.cfg.RetryInterval))
		cancel()
		if err != nil {
			c.log.Warn("hand-over failed; the lease will expire instead", "term", c.hold, "to", to, "err", err)
			c.metrics().Heartbeat(c.cfg.Name, 0, err)
			err = fmt.Errorf("election: handing over to %q: %w", to, err)
		}
	} else {
		c.dropHold(ctx)
	}
	c.hold = 0
	c.sitOut()
	if to != "" {
		// Not back before the others had their turn after a target that
		// never came.
		c.sitOutUntil = c.sitOutUntil.Add(TransferWindow(c.cfg.RetryInterval))
	}
	return err
}

// Proclaim implements Election.
func (c *candidate) Proclaim(ctx context.Context, value string) error {
	if len(value) > MaxValueLen || !utf8.ValidString(value) {
		return fmt.Errorf("election: proclaim: %w: value must be valid UTF-8 of at most %d bytes", ErrInvalidConfig, MaxValueLen)
	}
	return c.do(ctx, "proclaim", func(rctx context.Context) error {
		if !c.leading || !c.IsLeader() {
			return fmt.Errorf("election: proclaim: %w", ErrNotLeader)
		}
		changed := value != c.value
		c.value = value
		c.b.setValue(value)
		if !changed {
			return nil
		}
		c.step()
		qctx, cancel := c.queryContext(context.WithoutCancel(rctx), min(c.cfg.QueryTimeout, c.holdDeadline.Sub(c.cfg.Clock.Now())))
		held, err := c.b.proclaim(qctx, c.hold)
		cancel()
		switch {
		case err != nil:
			c.metrics().Heartbeat(c.cfg.Name, 0, err)
			return fmt.Errorf("election: proclaim: %w", err)
		case !held:
			// Deposed meanwhile: the next renewal stands it down.
			return fmt.Errorf("election: proclaim: the row no longer names this term: %w", ErrNotLeader)
		}
		r := c.seen
		r.Value = value
		c.observe(r)
		return nil
	})
}
