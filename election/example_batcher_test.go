package election_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// Many elections in one process (one per shard, say) share one Batcher: their
// renewals and reads are combined into few statements.
func ExampleNewBatcher() {
	db, done := exampleDB()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := election.NewBatcher(db, election.BatcherOptions{}) // the default table, as the elections'
	if err != nil {
		log.Fatal(err)
	}

	shards := []string{"shard-1", "shard-2", "shard-3"}
	elected := make(chan string, len(shards))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, shard := range shards {
		e, err := election.NewTable(db, election.Config{
			Name:      shard,
			Tuning:    election.TuningConfig{Batcher: b},
			Callbacks: election.Callbacks{OnElected: func(context.Context, election.Leadership) { elected <- shard }},
		})
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = e.Run(runCtx) }()
	}
	for range shards {
		<-elected
	}
	fmt.Println("leading", len(shards), "shards")
	stop()
	wg.Wait()
	// Output: leading 3 shards
}
