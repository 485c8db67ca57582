package election

import (
	"context"
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/takeset"
)

// TakeBatch runs the heartbeats of candidate id (holding nothing) in
// elections names as one batch of b's takes (Batcher.execTake), as
// tableBackend.beat sends them, and returns what each heartbeat did (its
// affected rows, as its reply would say) and its error, or the batch's.
func TakeBatch(ctx context.Context, b *Batcher, id string, lease time.Duration, names []string) ([]int64, []error, error) {
	f, hb := floor.NewStmts(b.opts.Table, stmt.Bound{}, time.Second), stmt.Must(probe.HeartbeatSQL(quoteTable(b.opts.Table)))
	reqs, dids := make([]takeReq, len(names)), make([]takeset.Did, len(names))
	for i, n := range names {
		reqs[i] = takeReq{Ctx: ctx, F: f, Heartbeat: hb, P: stmt.Params{Name: n, Me: id, Lease: lease.Milliseconds()}, Did: &dids[i]}
	}
	errs, err := b.execTake(ctx, reqs)
	affected := make([]int64, len(names))
	for i, d := range dids {
		affected[i] = d.N
	}
	return affected, errs, err
}
