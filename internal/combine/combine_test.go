package combine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// queued returns how many requests wait in the batch that is filling.
func (c *Combiner[Req, Res]) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return 0
	}
	return len(c.cur.reqs)
}

// The Combiner's tests run in synctest bubbles: synctest.Wait returns once
// every request started is blocked (running, queued in a batch, or waiting
// for a slot), the state each step checks, with no polling.
func TestCombinerBatchesWhileBusy(t *testing.T) {
	synctest.Test(t, testCombinerBatchesWhileBusy)
}

func testCombinerBatchesWhileBusy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	c := New(Options{MaxBatch: 3, MaxInFlight: 1, QueryTimeout: time.Second, Linger: -1},
		func(ctx context.Context, reqs []int) ([]int, error) {
			mu.Lock()
			sizes = append(sizes, len(reqs))
			first := len(sizes) == 1
			mu.Unlock()
			if first {
				<-release
			}
			out := make([]int, len(reqs))
			for i, r := range reqs {
				out[i] = r * 10
			}
			return out, nil
		})
	var wg sync.WaitGroup
	results := make([]int, 6)
	errs := make([]error, 6)
	do := func(i int) {
		defer wg.Done()
		results[i], errs[i] = c.Do(ctx, i)
	}
	wg.Add(1)
	go do(0)
	synctest.Wait()
	if c.queued() != 0 || len(c.slots) == 0 {
		t.Fatalf("request 0 not running: %d queued, %d slots taken", c.queued(), len(c.slots))
	}
	// 1..5 wait: a batch of 3 (full) and a batch of 2. Each request joins
	// before the next starts.
	for i, want := range []int{1, 2, 0, 1, 2} { // 0: the third filled the batch
		wg.Add(1)
		go do(i + 1)
		synctest.Wait()
		if got := c.queued(); got != want {
			t.Fatalf("request %d: %d queued, want %d", i+1, got, want)
		}
	}
	close(release)
	wg.Wait()
	for i := range 6 {
		if errs[i] != nil || results[i] != i*10 {
			t.Errorf("request %d: %d, %v; want %d", i, results[i], errs[i], i*10)
		}
	}
	if len(sizes) != 3 || sizes[0] != 1 || sizes[1]+sizes[2] != 5 || max(sizes[1], sizes[2]) != 3 {
		t.Errorf("batch sizes %v, want [1 3 2] or [1 2 3]", sizes)
	}
}

func TestCombinerErrorsAndCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	boom := errors.New("boom")
	tests := []struct {
		name string
		exec func(context.Context, []int) ([]int, error)
		want error
	}{
		{"error reaches every request", func(context.Context, []int) ([]int, error) { return nil, boom }, boom},
		{"short result", func(context.Context, []int) ([]int, error) { return nil, nil }, ErrShort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{MaxBatch: 10, MaxInFlight: 1, QueryTimeout: time.Second, Linger: -1}, tc.exec)
			if _, err := c.Do(ctx, 1); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("a waiter's context ends", func(t *testing.T) { synctest.Test(t, testCombinerWaiterContextEnds) })
	t.Run("a waiter's context ends while its batch runs", func(t *testing.T) { synctest.Test(t, testCombinerWaiterOfARunningBatch) })
}

// testCombinerWaiterOfARunningBatch: a waiter whose context ends after its
// batch began to run waits for the batch and gets its result, so that it
// learns what was done with its request (package election's takes: a term
// won unknown to its candidate cost the next one a lock delay).
func testCombinerWaiterOfARunningBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release := make(chan struct{})
	// The batch runs when full: requests 1 and 2.
	c := New(Options{MaxBatch: 2, MaxInFlight: 1, QueryTimeout: 5 * time.Second, Linger: time.Hour},
		func(ctx context.Context, reqs []int) ([]int, error) {
			<-release
			return reqs, nil
		})
	go func() { _, _ = c.Do(ctx, 1) }()
	wctx, wcancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		v, err := c.Do(wctx, 2)
		if err == nil && v != 2 {
			err = errors.New("wrong result")
		}
		got <- err
	}()
	synctest.Wait()
	if c.queued() != 0 || len(c.slots) == 0 {
		t.Fatal("the batch of requests 1 and 2 does not run")
	}
	wcancel()
	synctest.Wait()
	select {
	case err := <-got:
		t.Fatalf("request 2 returned (%v) while its batch runs", err)
	default:
	}
	close(release)
	if err := <-got; err != nil {
		t.Errorf("request 2: %v, want its batch's result", err)
	}
}

func testCombinerWaiterContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release := make(chan struct{})
	c := New(Options{MaxBatch: 10, MaxInFlight: 1, QueryTimeout: 5 * time.Second, Linger: -1},
		func(ctx context.Context, reqs []int) ([]int, error) {
			<-release
			return reqs, nil
		})
	done := make(chan error, 2)
	go func() { _, err := c.Do(ctx, 1); done <- err }()
	synctest.Wait()
	if len(c.slots) == 0 {
		t.Fatal("request 1 does not run")
	}
	go func() { _, err := c.Do(ctx, 2); done <- err }()
	synctest.Wait()
	if c.queued() != 1 {
		t.Fatalf("%d queued, want request 2, which opened the next batch and waits for the slot", c.queued())
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer wcancel()
	if _, err := c.Do(wctx, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiter: %v, want deadline exceeded", err)
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("request: %v", err)
		}
	}
}

// TestCombinerWaitersLeaveEarly: requests whose contexts end while their
// batch lingers or waits for a slot return their context's error without
// reading the batch's outcome, which its runner writes later (under -race,
// reading it was a data race; election's TestBatcherManyElections found it).
func TestCombinerWaitersLeaveEarly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := New(Options{MaxBatch: 1000, MaxInFlight: 1, QueryTimeout: time.Second, Linger: 2 * time.Millisecond},
		func(ctx context.Context, reqs []int) ([]int, error) { return reqs, nil })
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, rcancel := context.WithTimeout(ctx, time.Duration(i%4)*time.Millisecond)
			defer rcancel()
			if got, err := c.Do(rctx, i); err == nil && got != i {
				t.Errorf("request %d got %d", i, got)
			} else if err != nil && rctx.Err() == nil {
				t.Errorf("request %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
}

// TestByEarliest: a batch's context ends by the earliest deadline of its
// callers', and has none when none of them has one.
func TestByEarliest(t *testing.T) {
	base := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name      string
		deadlines []time.Duration // from base; negative: no deadline
		want      time.Duration   // negative: no deadline
	}{
		{"none", []time.Duration{-1, -1}, -1},
		{"one", []time.Duration{-1, 3 * time.Second}, 3 * time.Second},
		{"the earliest", []time.Duration{5 * time.Second, 2 * time.Second, 9 * time.Second}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctxs []context.Context
			for _, d := range tc.deadlines {
				ctx := context.Background()
				if d >= 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadline(ctx, base.Add(d))
					t.Cleanup(cancel)
				}
				ctxs = append(ctxs, ctx)
			}
			ctx, cancel := ByEarliest(context.Background(), ctxs)
			defer cancel()
			got, ok := ctx.Deadline()
			switch {
			case tc.want < 0 && ok:
				t.Errorf("deadline %v, want none", got)
			case tc.want >= 0 && (!ok || !got.Equal(base.Add(tc.want))):
				t.Errorf("deadline %v (%v), want %v", got, ok, base.Add(tc.want))
			}
		})
	}
}
