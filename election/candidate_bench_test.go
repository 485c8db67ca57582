package election

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/combine"
	"github.com/sqlelect/sqlelect/internal/stmt"
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

// BenchmarkBatchedCandidate is the cost of a batched election's candidate
// as a shard group starts one: NewTable, and its statements compiled again
// bounded once preflight knows the server (tableBackend.compile). The
// candidates of a Batcher share one compiled copy; alone, each compiles
// its own.
func BenchmarkBatchedCandidate(b *testing.B) {
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none") // never connects
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	for _, batched := range []bool{true, false} {
		b.Run(map[bool]string{true: "batched", false: "alone"}[batched], func(b *testing.B) {
			cfg := Config{Name: "orders/1", ID: "p1"}
			if batched {
				if cfg.Tuning.Batcher, err = NewBatcher(db, BatcherOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				c, err := NewTable(db, cfg)
				if err != nil {
					b.Fatal(err)
				}
				c.b.(*tableBackend).compile(stmt.NewBound(stmt.FlavorMariaDB, 5*time.Second))
			}
		})
	}
}
