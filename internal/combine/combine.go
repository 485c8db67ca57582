// Package combine runs requests of one kind that arrive together as one
// call: the Batchers of packages election (renewals, reads) and members
// (refreshes) use it, so that thousands of elections in one process send
// one statement where each would send its own.
package combine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Options configure a Combiner. New takes them as they are: the Batchers
// apply their defaults.
type Options struct {
	// MaxBatch is the most requests one call covers.
	MaxBatch int
	// MaxInFlight is how many calls may run at once.
	MaxInFlight int
	// QueryTimeout bounds each call.
	QueryTimeout time.Duration
	// Linger is how long the first request of a batch waits for others to
	// join before the batch runs (sooner when it is full); not positive
	// for none.
	Linger time.Duration
	// Clock times the linger. Nil: the time package's.
	Clock Clock
}

// Clock makes the linger's timers: election.Clock's NewTimer, as a
// Batcher adapts it.
type Clock interface {
	NewTimer(d time.Duration) Timer
}

// Timer is a single-shot timer of a Clock, as election.Timer.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Combiner runs requests in batches, each run as one call: a request joins
// the batch that is filling, if any; the first request of each batch waits
// out the linger (or until the batch is full) and a free slot, then runs
// the whole batch, so no goroutine of its own is needed. Its Options give
// the most requests in one batch (MaxBatch), how many batches may run at
// once (MaxInFlight), the bound of each batch's run (QueryTimeout), and how
// long a batch waits for more requests (Linger, on Clock).
type Combiner[Req, Res any] struct {
	mu    sync.Mutex
	cur   *pending[Req, Res]
	slots chan struct{}
	opts  Options
	exec  func(ctx context.Context, reqs []Req) ([]Res, error)
}

// pending is one batch of a Combiner.
type pending[Req, Res any] struct {
	reqs    []Req
	res     []Res
	err     error
	full    chan struct{} // closed when the batch reached the maximum size
	started chan struct{} // closed when it begins to run
	done    chan struct{} // closed when it ran
}

// New returns a Combiner that runs its batches with exec, which returns
// one result per request, in order.
func New[Req, Res any](opts Options, exec func(context.Context, []Req) ([]Res, error)) *Combiner[Req, Res] {
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	return &Combiner[Req, Res]{slots: make(chan struct{}, opts.MaxInFlight), opts: opts, exec: exec}
}

// ErrShort is a batch that returned fewer results than requests.
var ErrShort = errors.New("batch returned too few results")

// Do adds r to the batch that is filling, or starts one, and returns r's
// result once its batch ran, also when ctx ended after the batch began to
// run (the batch's bound, QueryTimeout, bounds the wait): a caller learns
// what a batch did with its request once it was sent. When ctx ends
// before, Do returns ctx's error at once, and the batch, which runs even
// if ctx ends first, may still run r: its exec leaves out a request whose
// caller gave up, where that matters (r's own context).
func (c *Combiner[Req, Res]) Do(ctx context.Context, r Req) (Res, error) {
	var zero Res
	c.mu.Lock()
	b := c.cur
	first := b == nil
	if first {
		b = &pending[Req, Res]{full: make(chan struct{}), started: make(chan struct{}), done: make(chan struct{})}
		c.cur = b
	}
	i := len(b.reqs)
	b.reqs = append(b.reqs, r)
	if len(b.reqs) >= c.opts.MaxBatch {
		c.cur = nil // full: later requests start another batch
		close(b.full)
	}
	c.mu.Unlock()

	if first {
		// Let others join for the linger and until a slot is free
		// (bounded by the running batches' timeouts), then close the
		// batch and run it. It runs even if this caller's context ends:
		// others wait for it.
		if c.opts.Linger > 0 {
			t := c.opts.Clock.NewTimer(c.opts.Linger)
			select {
			case <-t.C():
			case <-b.full:
				t.Stop()
			}
		}
		c.slots <- struct{}{}
		c.mu.Lock()
		if c.cur == b {
			c.cur = nil
		}
		c.mu.Unlock()
		close(b.started)
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.QueryTimeout)
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
		case <-ctx.Done():
			select {
			case <-b.started:
				<-b.done
			default: // not sent: b's fields are the runner's still
				return zero, ctx.Err()
			}
		}
	}
	if b.err != nil {
		return zero, b.err
	}
	return b.res[i], nil
}

// ByEarliest is ctx ending by the earliest deadline of ctxs too, a
// batch's callers'. Package election's batches of takes and give-ups run
// under it: a take committed after its candidate gave up on it would leave
// the candidate a row it did not know it held, which it must then wait out
// the lock delay to lead (crash of a shard group's member, BENCHMARKS.md),
// and a batch waits for its turn (Do) outside its callers' deadlines.
func ByEarliest(ctx context.Context, ctxs []context.Context) (context.Context, context.CancelFunc) {
	var first time.Time
	for _, c := range ctxs {
		if d, ok := c.Deadline(); ok && (first.IsZero() || d.Before(first)) {
			first = d
		}
	}
	if first.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, first)
}

// Slots lets as many calls run at once as it has room for (make(Slots, n)).
type Slots chan struct{}

// Run runs f once fewer than the Slots' room run, and returns its error;
// ctx's error, and f not run, when ctx ends first.
func (s Slots) Run(ctx context.Context, f func() error) error {
	select {
	case s <- struct{}{}:
		defer func() { <-s }()
		return f()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// realClock is the time package's Clock: what a nil Clock means.
type realClock struct{}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
