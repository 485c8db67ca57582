// Package batch combines requests that arrive while others run into
// batches, each run as one call: a Batcher's renewals and reads in package
// election.
package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Combiner runs requests in batches: a request joins the batch that is
// filling, if any; the first request of each batch waits out the linger (or
// until the batch is full) and a free slot, then runs the whole batch, so no
// goroutine of its own is needed.
type Combiner[Req, Res any] struct {
	mu    sync.Mutex
	cur   *batch[Req, Res]
	slots chan struct{}
	o     Options
	exec  func(ctx context.Context, reqs []Req) ([]Res, error)
}

type batch[Req, Res any] struct {
	reqs []Req
	res  []Res
	err  error
	full chan struct{} // closed when the batch reached the maximum size
	done chan struct{} // closed when it ran
}

// Options configure a Combiner.
type Options struct {
	MaxBatch    int           // the most requests in one batch, at least 1
	MaxInFlight int           // how many batches may run at once, at least 1
	Timeout     time.Duration // bounds each batch's run
	Linger      time.Duration // how long a batch waits for more requests; not positive for none
	// Timer times the linger: a channel that fires once after d, and the
	// function that stops it. Needed with a positive Linger.
	Timer func(d time.Duration) (fire <-chan time.Time, stop func() bool)
}

// New returns a Combiner that runs its batches with exec, which returns
// one result per request, in order.
func New[Req, Res any](o Options, exec func(context.Context, []Req) ([]Res, error)) *Combiner[Req, Res] {
	return &Combiner[Req, Res]{slots: make(chan struct{}, o.MaxInFlight), o: o, exec: exec}
}

// ErrShort is a batch that returned fewer results than requests.
var ErrShort = errors.New("batch: batch returned too few results")

// Do adds r to the batch that is filling, or starts one, and returns r's
// result once its batch ran. The batch runs even if ctx ends first.
func (c *Combiner[Req, Res]) Do(ctx context.Context, r Req) (Res, error) {
	var zero Res
	c.mu.Lock()
	b := c.cur
	first := b == nil
	if first {
		b = &batch[Req, Res]{full: make(chan struct{}), done: make(chan struct{})}
		c.cur = b
	}
	i := len(b.reqs)
	b.reqs = append(b.reqs, r)
	if len(b.reqs) >= c.o.MaxBatch {
		c.cur = nil // full: later requests start another batch
		close(b.full)
	}
	c.mu.Unlock()

	if first {
		// Let others join for the linger and until a slot is free
		// (bounded by the running batches' timeouts), then close the
		// batch and run it. It runs even if this caller's context ends:
		// others wait for it.
		if c.o.Linger > 0 {
			fire, stop := c.o.Timer(c.o.Linger)
			select {
			case <-fire:
			case <-b.full:
				stop()
			}
		}
		c.slots <- struct{}{}
		c.mu.Lock()
		if c.cur == b {
			c.cur = nil
		}
		c.mu.Unlock()
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.Timeout)
		b.res, b.err = c.exec(ectx, b.reqs)
		cancel()
		if b.err == nil && len(b.res) < len(b.reqs) {
			b.err = fmt.Errorf("%w: %d of %d", ErrShort, len(b.res), len(b.reqs))
		}
		<-c.slots
		close(b.done)
	} else {
		select {
		case <-b.done:
		case <-ctx.Done(): // the check below returns its error
		}
	}
	if ctx.Err() != nil {
		return zero, ctx.Err()
	}
	if b.err != nil {
		return zero, b.err
	}
	return b.res[i], nil
}
