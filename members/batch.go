package members

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/combine"
	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Batcher lets the members of many elections in one process share their
// refreshes, as election.Batcher lets their candidates share their
// renewals: set Options.Batcher, for every member of election table table,
// and the refreshes that arrive together (within 5 ms, or while another
// batch is in flight) are written by one UPDATE of up to 500 rows. The
// members of a Batcher refresh at the same instants (every half lease on
// the process's clock, at a phase of the Batcher's own), so that a
// process's refreshes form full batches: a process with 10,000 members of
// one lease sends 20 statements per half lease instead of 10,000.
//
// Only the refresh is batched. A member whose row the batch's UPDATE did
// not refresh all (deleted, taken by another incarnation, or a batch that
// matched fewer rows than it has members, for any reason) refreshes on its
// own, and registers again or stops with a DuplicateError exactly as
// without a Batcher. Registration and removal are each member's own.
//
// The Batcher starts no goroutines: the first member of each batch runs
// it. Safe for concurrent use.
type Batcher struct {
	db    *sql.DB
	table string // the election table
	tbl   string // its members table, quoted
	// phase offsets the instants this Batcher's members refresh at, so that
	// the processes of a service do not all refresh at once.
	phase     time.Duration
	refreshes *combine.Combiner[refreshReq, bool]
	// statements counts the batched UPDATEs, fallbacks the members that
	// refreshed on their own after one (for the tests).
	statements, fallbacks atomic.Uint64
}

// refreshReq is one member's refresh: its row's key and what it writes.
type refreshReq struct {
	name, id, inc string
	healthy       bool
	priority      int
}

// NewBatcher returns a Batcher for the members of the elections of election
// table table (default service_election) that runs its statements on db,
// which stays the caller's. Each statement is bounded by 5 s. An invalid
// table wraps election.ErrInvalidConfig.
func NewBatcher(db *sql.DB, table string) (*Batcher, error) {
	if db == nil {
		return nil, election.ErrNilDB
	}
	table = cmp.Or(table, election.DefaultTable)
	if err := ident.Table(Table(table)); err != nil {
		return nil, err
	}
	var p [8]byte
	_, _ = rand.Read(p[:]) // never fails (crypto/rand)
	b := &Batcher{db: db, table: table, tbl: ident.Quote(Table(table)), phase: time.Duration(binary.LittleEndian.Uint64(p[:]) >> 1)}
	// election.BatcherOptions' defaults.
	b.refreshes = combine.New(combine.Options{MaxBatch: 500, MaxInFlight: 4, QueryTimeout: 5 * time.Second, Linger: 5 * time.Millisecond}, b.execRefresh)
	return b, nil
}

// execRefresh refreshes a batch of members with one UPDATE: their
// last_seen, and each one's health and priority (chosen by its incarnation,
// new for each Run), where their rows still have their incarnations and
// the session's clock is trusted (dbclock.Trusted, as refresh). Each is
// true when the UPDATE changed as many rows as the batch has members: then
// every row was refreshed. Otherwise all are false, and each member
// refreshes on its own.
func (b *Batcher) execRefresh(ctx context.Context, reqs []refreshReq) ([]bool, error) {
	query, args := b.refreshStatement(reqs)
	b.statements.Add(1)
	res, err := b.db.ExecContext(ctx, query, args...)
	if err != nil {
		return nil, classify(err, Table(b.table))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, classify(err, Table(b.table))
	}
	out := make([]bool, len(reqs))
	for i := range out {
		out[i] = n == int64(len(reqs))
	}
	return out, nil
}

// refreshStatement returns execRefresh's UPDATE of reqs, with its values
// as literals (stmt.Put) where they can be. It finds its rows by the
// primary key's ranges (FORCE INDEX): for a batch that is a large part of
// the table, MariaDB would rather scan the whole key, which under
// REPEATABLE READ locks every row of the table while it runs
// (TestBatcherStatementUsesKey).
func (b *Batcher) refreshStatement(reqs []refreshReq) (string, []any) {
	var q strings.Builder
	var args []any
	put := func(sql string, x any) {
		q.WriteString(sql)
		args = stmt.Put(&q, args, x)
	}
	q.WriteString(`UPDATE ` + b.tbl + ` FORCE INDEX (PRIMARY) SET last_seen = ` + dbclock.TermNow)
	for _, col := range []string{"healthy", "priority"} {
		q.WriteString(`, ` + col + ` = CASE incarnation`)
		for _, r := range reqs {
			v := r.priority
			if col == "healthy" {
				v = 0
				if r.healthy {
					v = 1
				}
			}
			put(` WHEN `, r.inc)
			put(` THEN `, v)
		}
		q.WriteString(` ELSE ` + col + ` END`)
	}
	if len(reqs) == 1 {
		// A list of one row value makes MariaDB (10.11, 11.8) scan the
		// whole key, even forced: the columns one by one.
		put("\nWHERE anchor = ", reqs[0].name)
		put(` AND member_id = `, reqs[0].id)
		put(` AND incarnation = `, reqs[0].inc)
	} else {
		q.WriteString("\nWHERE (anchor, member_id, incarnation) IN (")
		sep := "("
		for _, r := range reqs {
			put(sep, r.name)
			put(`,`, r.id)
			put(`,`, r.inc)
			q.WriteByte(')')
			sep = ",("
		}
		q.WriteByte(')')
	}
	q.WriteString(` AND ` + dbclock.Trusted)
	return q.String(), args
}

// check returns an error wrapping election.ErrInvalidConfig when b is not
// for cfg's election table.
func (b *Batcher) check(cfg election.Config) error {
	if b.table != cfg.Table {
		return fmt.Errorf("members: %w: the Batcher's table %q is not the election's table %q", election.ErrInvalidConfig, b.table, cfg.Table)
	}
	return nil
}

// refreshBatched refreshes the member through its Batcher, and on its own
// (refresh) when the batch did not refresh its row.
func (m *member) refreshBatched(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, m.cfg.Tuning.QueryTimeout)
	ok, err := m.o.Batcher.refreshes.Do(qctx, refreshReq{name: m.c.Name(), id: m.c.ID(), inc: m.inc,
		healthy: m.healthy(), priority: m.cfg.Preference.Priority})
	cancel()
	if err != nil || ok {
		return err
	}
	m.o.Batcher.fallbacks.Add(1)
	return m.refresh(ctx)
}

// untilRefresh is how long the member waits for its next refresh: every
// half lease, and with a Batcher until the next instant of the Batcher's
// members (a multiple of the half lease, offset by its phase, on the
// clock), which is never later.
func (m *member) untilRefresh(every time.Duration) time.Duration {
	if m.o.Batcher == nil {
		return every
	}
	t := m.cfg.Tuning.Clock.Now().UnixNano() - int64(m.o.Batcher.phase)
	return every - time.Duration(t%int64(every)+int64(every))%every
}
