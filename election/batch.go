package election

import (
	"cmp"
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/internal/combine"
	"github.com/sqlelect/sqlelect/internal/heldtx"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/takeset"
)

// BatcherOptions configures a Batcher. The zero value of every field means
// its default.
type BatcherOptions struct {
	// Table is the election table, as in Config.Table. Default DefaultTable.
	Table string
	// MaxBatch is the most elections one statement covers. Default 500.
	MaxBatch int
	// MaxInFlight is how many statements of each kind (renewals, reads)
	// may run at once. Default 4. Takeovers run one batch at a time.
	MaxInFlight int
	// QueryTimeout bounds each batched statement. Default 5 s.
	QueryTimeout time.Duration
	// Linger is how long the first election of a batch waits for others to
	// join before the batch runs (sooner when it is full): it adds to the
	// heartbeat's latency, which matters little next to the renew
	// interval. Default 5 ms; negative for none.
	Linger time.Duration
	// Clock times the linger. Default nil: the time package's.
	Clock Clock
}

// Batcher lets many table-backend elections in one process share their
// steady-state statements, for services that run an election per shard:
// the leaders' renewals and the followers' reads that arrive while another
// batch is in flight are combined into one statement, so the number of
// statements grows with the load's burstiness, not with the number of
// elections. Set Config.Tuning.Batcher to use it; every election of a Batcher must
// use its table.
//
// A renewal takes the rows' locks with SELECT … FOR UPDATE SKIP LOCKED and
// renews those that still name their candidate and term, in one
// transaction; any election whose row is locked by someone else, or no
// longer matches, falls back to its own heartbeat statement, so one
// stalled row never delays the others' renewals, and takeovers, deposition
// and operator changes are decided exactly as without a Batcher. Those
// heartbeats, which may assign terms, run many in one term floor's
// transaction (up to 500, one such transaction at a time; see execTake),
// and each alone when that fails, MaxInFlight at a time: a row locked
// elsewhere can delay a batch of them by the lock-wait bound. A batch of
// distinct elections sends a few statements for the whole batch: one
// heartbeat statement for them all, reads of their rows around it, and
// the floor's and history's statements (internal/takeset).
// Give-ups (releases, hand-offs and hand-overs, such as a shard group's
// leave) go as renewals do: the rows locked and still held are given up,
// and their terms ended in the history, two statements for each kind,
// target and lease in the batch.
// Followers read the rows of many elections with one SELECT.
// Run's preflight is shared too: the elections that share a Batcher and
// their *sql.DB run it one at a time, and reuse one that passed less than a
// lease ago, so that thousands of elections that start at once send one.
// Fast handover (Config.Tuning.DisableFastHandover) is off for batched elections:
// a handover waits for a follower's next look, and a planned change's
// request for the leader's next renewal (no bell).
//
// The Batcher starts no goroutines: the first caller of each batch runs it.
// It needs MySQL 8.0 or MariaDB 10.6 (SKIP LOCKED). Safe for concurrent use.
type Batcher struct {
	db   *sql.DB
	opts BatcherOptions // defaults applied

	// preflight lets one of the Batcher's candidates at a time run its
	// preflight, which may reuse verdict, the last that passed (see
	// tableBackend.verdict); verdict is guarded by it.
	preflight chan struct{}
	verdict   *verdict

	// renews renews the term of a candidate in an election if the row
	// still says so and is not locked by another transaction: false
	// otherwise, and the caller decides with its own heartbeat.
	renews *combine.Combiner[renewReq, bool]
	// reads reads an election's row: a Record of the election alone when
	// there is none.
	reads *combine.Combiner[string, Record]
	// takes runs the heartbeats that may assign a term (tableBackend.beat),
	// each in the term floor's transaction, many in one (execTake).
	takes *combine.Combiner[takeReq, error]
	// solo runs the takes sent alone after their batch failed, MaxInFlight
	// at a time (tableBackend.beat): a failed batch's 500 sent alone at
	// once waited for every connection of a shards process's bounded pool,
	// and the renewals queued behind them (100,000 shards over 5 processes).
	solo combine.Slots
	// gives gives up held rows (releases, hand-offs, hand-overs) if the
	// rows still say so and are not locked by another transaction: false
	// otherwise, and the caller sends its own statements.
	gives *combine.Combiner[giveReq, bool]

	sql batchStmts // compiled by NewBatcher
	tx  heldtx.Tx  // renewals' and give-ups' transactions, with sql's session statements
	// stmts are sql's statements that may wait for a lock, bounded for
	// the server's lock waits, detected at the first that needs them.
	stmts atomic.Pointer[boundStmts]
	// candidates are its candidates' statements, by bound and lock delay
	// (compiled).
	candidates sync.Map
}

// candidateStmts are a candidate's statements (tableBackend.compile).
type candidateStmts struct {
	table tableStmts
	held  heldStmts
}

// compiled returns the statements of the Batcher's candidates bounded by
// bound, with lock delay d, compiled once for them all: each compiling its
// own, twice (NewTable, preflight), a candidate's start allocated 53 KB in
// 65 µs, and one of 20,000 shards per process kept 29 KB
// (BenchmarkBatchedCandidate: 5 KB and 7 µs shared).
func (b *Batcher) compiled(bound stmt.Bound, d time.Duration) candidateStmts {
	type key struct {
		bound stmt.Bound
		d     time.Duration
	}
	c, ok := b.candidates.Load(key{bound, d})
	if !ok {
		c, _ = b.candidates.LoadOrStore(key{bound, d}, candidateStmts{tableStatements(b.opts.Table, bound, d), heldStatements(b.opts.Table, bound, bound)})
	}
	return c.(candidateStmts)
}

// renewReq is an election's row as its candidate holds it, and its
// caller's context: a batch leaves it out once its caller gave up.
type renewReq = heldtx.Row

// giveReq gives up the row of election name that candidate id holds with
// term as w does (a release, hand-off or hand-over), with its :to and
// :lease (tableBackend.writeRow; a release's :lease is 0: it reads none).
type giveReq struct {
	renewReq
	w     rowWrite
	to    string
	lease int64
}

// NewBatcher returns a Batcher that runs its statements on db, which stays
// the caller's. opts is copied; an invalid table wraps ErrInvalidConfig.
func NewBatcher(db *sql.DB, opts BatcherOptions) (*Batcher, error) {
	if db == nil {
		return nil, ErrNilDB
	}
	opts.Table = cmp.Or(opts.Table, DefaultTable)
	if err := ident.Table(opts.Table); err != nil {
		return nil, err
	}
	// The defaults BatcherOptions documents; for MaxBatch, MaxInFlight
	// and QueryTimeout also when not positive.
	opts.MaxBatch = cmp.Or(max(opts.MaxBatch, 0), 500)
	opts.MaxInFlight = cmp.Or(max(opts.MaxInFlight, 0), 4)
	opts.QueryTimeout = cmp.Or(max(opts.QueryTimeout, 0), defaultQueryTimeout)
	opts.Linger = cmp.Or(opts.Linger, 5*time.Millisecond)
	opts.Clock = cmp.Or[Clock](opts.Clock, realClock{})
	b := &Batcher{db: db, opts: opts, sql: batchStatements(opts.Table, opts.QueryTimeout), preflight: make(chan struct{}, 1), solo: make(combine.Slots, opts.MaxInFlight)}
	b.tx = heldtx.Tx{DB: db, Setup: []string{b.sql.bound, readCommitted}, Restore: b.sql.restore}
	copts := combine.Options{MaxBatch: opts.MaxBatch, MaxInFlight: opts.MaxInFlight, QueryTimeout: opts.QueryTimeout, Linger: opts.Linger, Clock: lingerClock{opts.Clock}}
	b.renews = combine.New(copts, b.execRenew)
	b.reads = combine.New(copts, b.execRead)
	b.gives = combine.New(copts, b.execGive)
	// One batch of takes at a time: they wait for each other on the
	// floor's marker when they hold first elections.
	copts.MaxBatch, copts.MaxInFlight = min(copts.MaxBatch, maxTakeBatch), 1
	b.takes = combine.New(copts, b.execTake)
	return b, nil
}

// lingerClock is a Batcher's Clock as its combiners' (combine.Clock).
type lingerClock struct{ Clock }

func (c lingerClock) NewTimer(d time.Duration) combine.Timer { return c.Clock.NewTimer(d) }

// minRenewBatch is the smallest batch of renewals or give-ups worth a
// transaction (seven statements or more); smaller ones use each
// election's own statements.
const minRenewBatch = 5

// execRenew renews a batch (see locked): those of its rows that it can
// lock and that still name their candidate and term.
func (b *Batcher) execRenew(ctx context.Context, reqs []renewReq) ([]bool, error) {
	return b.locked(ctx, b.sql.lock, reqs, func(c *sql.Conn, held []int) error {
		names := make([]string, len(held))
		for i, k := range held {
			names[i] = reqs[k].Name
		}
		query, args := stmt.In(b.sql.renew, names, nil)
		_, err := c.ExecContext(ctx, query, args...)
		return err
	})
}

// execGive gives up a batch of held rows (tableBackend.writeRow): those
// it can lock that still name their candidate and term (see locked), each
// as its own statement would (giveUpTx), and ends their terms in the
// history in the same transaction: two statements for each kind of
// give-up, target and lease in the batch (one pair for its releases, one
// for the hand-overs to each target, one for each hand-off, whose leases
// differ). Like a batch of takes it ends by the earliest deadline of its
// callers (see combine.ByEarliest), and leaves out those that gave up: a give-up
// commits only for a caller still waiting for it.
func (b *Batcher) execGive(ctx context.Context, reqs []giveReq) ([]bool, error) {
	keys := make([]renewReq, len(reqs))
	var ctxs []context.Context // of the callers still waiting (locked leaves the others out)
	for i, r := range reqs {
		if keys[i] = r.renewReq; r.Ctx.Err() == nil {
			ctxs = append(ctxs, r.Ctx)
		}
	}
	ctx, cancel := combine.ByEarliest(ctx, ctxs)
	defer cancel()
	return b.locked(ctx, b.sql.giveLock, keys, func(c *sql.Conn, held []int) error {
		type how struct {
			w     rowWrite
			to    string
			lease int64
		}
		groups := map[how]*stmt.Params{}
		var order []how
		for _, k := range held {
			r := reqs[k]
			h := how{r.w, r.to, r.lease}
			if groups[h] == nil {
				groups[h], order = &stmt.Params{To: r.to, Lease: r.lease}, append(order, h)
			}
			p := groups[h]
			p.Names, p.Terms = append(p.Names, r.Name), append(p.Terms, r.Term)
		}
		for _, h := range order {
			for _, s := range []stmt.Stmt{b.sql.give[h.w], b.sql.giveEnd} {
				if _, err := s.Exec(ctx, c, *groups[h]); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// locked runs f in one transaction on the rows of reqs that their
// candidates still hold and whose callers still wait (heldtx.Tx.Run),
// locked by lock (sql.lock or sql.giveLock); their results are true. A
// batch smaller than minRenewBatch is left out: each request falls back to
// its election's own statements.
func (b *Batcher) locked(ctx context.Context, lock string, reqs []renewReq, f func(c *sql.Conn, held []int) error) ([]bool, error) {
	if len(reqs) < minRenewBatch {
		return make([]bool, len(reqs)), nil
	}
	out, err := b.tx.Run(ctx, lock, reqs, f)
	if err != nil {
		return nil, probe.Classify(err, b.opts.Table)
	}
	return out, nil
}

// maxTakeBatch is the most heartbeats one transaction of execTake sends,
// set-based (internal/takeset): a few statements for the batch; one
// heartbeat each when an election is in it twice, about half a second at
// a round trip of a millisecond (the batch fails, and each election sends
// alone, past QueryTimeout). At 100,000 shards over 5 processes, where
// first elections wait for each other's marker lock, 500 led 2.3 times as
// many shards in 4 minutes as 100 did.
const maxTakeBatch = 500

// takeReq is an election's heartbeat that may assign a term, in the term
// floor's transaction (tableBackend.beat).
type takeReq = takeset.Req

// execTake runs a batch of heartbeats that may assign terms, many in one
// term floor's transaction (takeset.Exec), with the statements bounded for
// the server.
func (b *Batcher) execTake(ctx context.Context, reqs []takeReq) ([]error, error) {
	s, err := b.bounded(ctx)
	if err != nil {
		out := make([]error, len(reqs))
		for i := range out {
			out[i] = err
		}
		return out, nil
	}
	return takeset.Exec(ctx, b.db, s.take, reqs)
}

// bounded returns the Batcher's statements bounded for the server (see
// stmt.Bound), which it compiles at the first call, once it read the
// server's version.
func (b *Batcher) bounded(ctx context.Context) (*boundStmts, error) {
	if s := b.stmts.Load(); s != nil {
		return s, nil
	}
	bound, err := stmt.DetectBound(ctx, b.db, b.opts.QueryTimeout)
	if err != nil {
		return nil, err
	}
	s := b.sql.bounded(bound)
	b.stmts.Store(s)
	return s, nil
}

// execRead reads the rows of a batch of elections with the reads'
// statement, bounded for the server (see bounded).
func (b *Batcher) execRead(ctx context.Context, names []string) ([]Record, error) {
	s, err := b.bounded(ctx)
	if err != nil {
		return nil, err
	}
	query, args := stmt.In(s.read, names, nil)
	recs, err := scanRecords(b.db.QueryContext(ctx, query, args...))
	if err != nil {
		return nil, probe.Classify(err, b.opts.Table)
	}
	byName := make(map[string]Record, len(recs))
	for _, r := range recs {
		byName[r.Election] = r
	}
	out := make([]Record, len(names))
	for i, n := range names {
		out[i] = cmp.Or(byName[n], Record{Election: n}) // zero: no row
	}
	return out, nil
}
