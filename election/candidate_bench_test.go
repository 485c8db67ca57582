package election

import (
	"context"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/combine"
)

func BenchmarkIsLeader(b *testing.B) {
	for _, tc := range []struct {
		name    string
		leading bool
	}{{"leader", true}, {"follower", false}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, err := Config{Name: "bench"}.settings()
			if err != nil {
				b.Fatal(err)
			}
			c := newCandidate(cfg, nil)
			if tc.leading {
				c.setDeadline(c.epoch.Add(time.Hour))
			}
			b.ReportAllocs()
			for b.Loop() {
				if c.IsLeader() != tc.leading {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

// BenchmarkClockRead is the floor under IsLeader for a leader: one read of
// the monotonic clock (time.Since on a monotonic reading).
func BenchmarkClockRead(b *testing.B) {
	start := time.Now()
	var sink time.Duration
	for b.Loop() {
		sink += time.Since(start)
	}
	_ = sink
}

// BenchmarkLeadershipContext is the cheaper check a hot loop can make
// instead of IsLeader: whether the context given to OnElected is done. It is
// cancelled by a watchdog goroutine at the deadline, so right after the
// process was frozen past its deadline it may still look alive until that
// goroutine runs; IsLeader never does.
func BenchmarkLeadershipContext(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := ctx.Done()
	for b.Loop() {
		select {
		case <-done:
			b.Fatal("done")
		default:
		}
	}
}

// BenchmarkBatcherCombine is the in-process cost of one request through a
// Batcher's combiner (the statement itself excluded), with 8 goroutines.
func BenchmarkBatcherCombine(b *testing.B) {
	c := combine.New(combine.Options{MaxBatch: 500, MaxInFlight: 1, QueryTimeout: time.Second, Linger: -1},
		func(_ context.Context, reqs []int) ([]int, error) { return reqs, nil })
	ctx := context.Background()
	b.SetParallelism(4)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Do(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
