package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// NewLock returns a candidate of the GET_LOCK backend: the election is the
// MySQL user-level lock named after the database, cfg.Table and cfg.Name
// (docs/operations.md, "Lock names and rolling upgrades"), the database
// being the table's (its qualifier, else the connection's default database,
// read by Run), held on a connection dedicated to this candidate, and the holder publishes who it is in the same table row as
// the table backend, so that Leader, Status, the CLI and plain SQL answer "who
// leads" the same way for both backends (with backend = 'lock' and the
// holder's connection_id).
//
// How it works:
//
//   - The candidate takes one connection from db (db.Conn) and keeps it for
//     the whole campaign. It never goes back to the pool: when the campaign
//     ends, or after any error on it, it is closed (which also frees a lock
//     it held), and a fresh one is taken next time. db must therefore allow
//     one more open connection per running candidate (SetMaxOpenConns).
//   - The connection's session wait_timeout (and interactive_timeout) is set
//     to the lease rounded up to whole seconds, so the server itself drops a
//     holder that stops talking (hung process, network partition) and frees
//     the lock. The TCP keepalive variables are tried too where the server
//     lets a session set them.
//   - A waiting candidate takes the lock with GET_LOCK(name, 0) when it is
//     free. Otherwise it waits, up to min(RetryInterval, QueryTimeout/2), for
//     the holder to let go, with a statement that the server ends by taking
//     the lock and releasing it at once (so every waiter wakes), then tries
//     GET_LOCK(name, 0) again; it reads the row after each wait, so it keeps
//     observing who leads and wakes as soon as the lock is freed. A waiter
//     never queues for the lock itself: the server would grant a queued
//     GET_LOCK to a process that is frozen (SIGSTOP, a paused VM), which
//     could neither take the row nor let the lock go, and the election would
//     wait about a lease for the server to drop that idle session. The one
//     window left is a process frozen between its GET_LOCK(name, 0) and the
//     row's write that follows, a few milliseconds.
//   - A candidate that gets the lock reads the row and takes it (a new term,
//     its id, value and connection id) unless it names another candidate
//     with a live lease that no lock holder wrote (an operator's REPLACE):
//     then it lets the lock go for the named candidate. A row that was
//     released or has expired by the database clock is taken with no lock
//     delay. A live row written by a lock holder whose connection is gone
//     (killed, crashed, dropped by wait_timeout) is taken with a lock delay of
//     what was left of its lease (at most LockDelay): the old holder stands
//     down by its own clock RenewDeadline after its last renewal, before its
//     lease ends. A live row that names this candidate and that no lock
//     holder wrote is taken with what is left of LockDelay counted from that
//     write, by the database clock (see sinceWritten). A new row (there was
//     none) waits out LockDelay.
//   - A waiter that finds no row while another connection holds the lock
//     writes one naming itself and no lock connection, as Assume would (a
//     placeholder: see watch), and then waits for the lock as the named candidate: after
//     an operator's DELETE the lock delay counts from that write, not from
//     when the lock comes, which can be a lease later when its holder is cut
//     off from the database (the server keeps its session until
//     wait_timeout).
//   - The holder checks every RenewInterval that its connection still holds
//     the lock (IS_USED_LOCK(name) = CONNECTION_ID()) and then renews the row
//     (last_seen_active, lease, value) where it still names it with its
//     term. If the lock connection fails, it tries once on a fresh
//     connection: it keeps its term only if it gets the lock back at once
//     and the row is unchanged. Like the table backend it stands down by its
//     monotonic clock when no renewal succeeded within RenewDeadline.
//   - Resign (and the end of Run) marks the row released and releases the
//     lock, so a waiting candidate takes over within milliseconds.
//   - A transfer (Transfer, or an operator's request that the renewal finds:
//     it fails while transfer_to is set) stands the holder down, marks the
//     row released and reserved for the target, and releases the lock.
//     The waiters wake, and whichever gets the lock first reads the row: the
//     target takes it (acquired = 'transferred', no lock delay); any other
//     lets the lock go again at once and looks again when the transfer window
//     ends, so the lock reaches the target within a few round trips, and the
//     row is never taken by another candidate during the window.
//
// Operator actions mean the same as on the table backend:
//
//   - Force-assume (Assume, or REPLACE INTO service_election ... naming id):
//     the holder's next renewal finds its term gone, so it stands down, sees
//     the operator's row naming another candidate and releases the lock.
//     Candidates that get the lock let it go again while the row names
//     someone else; the named candidate takes the row with a new term and
//     leads LockDelay after the operator's write, even when the lock came to
//     it later (a holder cut off from the database keeps it until the server
//     drops its session, wait_timeout after its last statement). If it never
//     comes, the row expires after its lease and the election goes on.
//   - Force re-election (Reelect, or DELETE FROM service_election WHERE
//     anchor = ...): the holder's next renewal finds no row; it stands down,
//     writes a new row naming itself and marks it released at once, releases
//     the lock and sits out two retry intervals, so another candidate wins
//     (without a lock delay: the old holder stood down before releasing).
//     But a waiter that looks before the holder's renewal finds no row either
//     and writes one naming itself (a placeholder, see watch): then it, or whoever
//     the holder's release lets take that row, leads LockDelay after the
//     write, as on the table backend, where any candidate may insert the
//     missing row. A holder that cannot act (cut off, dead) keeps the lock
//     until the server drops its session; meanwhile that placeholder's
//     LockDelay runs.
//
// An operator sees which connection holds the lock with
// SELECT IS_USED_LOCK(name), name as docs/operations.md gives it (for example
// 'sqlelect:app.service_election:jobs'); the row's connection_id says the
// same.
//
// All candidates of one election must use the same backend, and versions
// that name the lock alike (see docs/operations.md: a rolling upgrade that mixes lock
// namings makes leadership flap). Topologies where
// GET_LOCK is not cluster-wide are refused by Run with an error wrapping
// ErrUnsupportedTopology: a Galera cluster (MariaDB Galera, Percona XtraDB
// Cluster: wsrep_on or a wsrep provider) and MySQL Group Replication in
// multi-primary mode. Use NewTable there.
//
// db is the caller's: the library never opens or closes it. cfg is copied,
// defaults filled in and validated; errors wrap ErrInvalidConfig. NewLock does
// no I/O: Run checks the table and the topology first.
func NewLock(db *sql.DB, config Config) (*Candidate, error) {
	if db == nil {
		return nil, ErrNilDB
	}
	cfg, err := config.settings()
	if err != nil {
		return nil, err
	}
	if cfg.Batcher != nil {
		return nil, fmt.Errorf("%w: the lock backend cannot use a Batcher (each candidate needs its own connection)", ErrInvalidConfig)
	}
	log := cfg.Logger.With("election", cfg.Name, "id", cfg.ID, "backend", "lock")
	b := &lockBackend{backendBase: backendBase{db: db, cfg: cfg, value: cfg.Value}, log: log, lc: getlock.Conn{Log: log}}
	return newCandidate(cfg, b), nil
}

// lockBackend is the GET_LOCK backend. Every method but leader is called from
// the Run goroutine only, so the connection state needs no mutex.
type lockBackend struct {
	backendBase
	log *slog.Logger

	waitTimeout time.Duration // the lock connection's wait_timeout
	lockWait    time.Duration // how long a follower blocks in GET_LOCK

	// lc is the lock connection, on the lock getlock.Name(database, cfg.Table,
	// cfg.Name), set by preflight. After an error on it, it is discarded
	// (see done).
	lc getlock.Conn
	// wrote is the term lc's connection last wrote naming this candidate
	// and itself, holding the lock (not a placeholder's: see claimOf).
	wrote       uint64
	lastUsed    time.Time // end of lc's last statement, for the idle limit
	noKeepalive bool      // the server refused the session keepalive variables (see ensureConn)

	// The lock connection's session has the same limits as bound.
	sql lockStmts // compiled by prepare
}

// prepare compiles the statements and sets the limits of the lock
// connection, for the lock lock; bound bounds the statements run on a
// pooled connection.
func (b *lockBackend) prepare(lock getlock.Lock, bound stmt.Bound) {
	cfg := b.cfg
	secs := max(int64(math.Ceil(cfg.LeaseDuration.Seconds())), 1)
	b.waitTimeout = time.Duration(secs) * time.Second
	b.lockWait = min(cfg.RetryInterval, cfg.QueryTimeout/2)
	b.lc.Lock = lock
	b.sql = lockStatements(cfg.Table, cfg.Name, lock, b.lockWait, cfg.LockDelay)
	// Without the lock connection, a statement runs on a pooled one (see
	// writeRow), on a session whose time zone has no daylight saving time
	// only (heldCond).
	b.held = heldStatements(cfg.Table, stmt.Bound{}, bound)
	b.sql.session = lockSessionSQL(secs, stmt.WaitSecs(cfg.QueryTimeout))
}

func (b *lockBackend) preflight(ctx context.Context) (stmt.Bound, error) {
	// The peek: the SELECT privilege's probe reads every column the
	// backend reads.
	v, err := readVerdict(ctx, b.db, b.cfg.Table, probe.Lock, probe.Privileges(quoteTable(b.cfg.Table))[0].Query)
	if err != nil {
		return stmt.Bound{}, err
	}
	if b.adopt, err = adoptedMillis(v.lease, b.cfg); err != nil {
		return stmt.Bound{}, err
	}
	bound := stmt.NewBound(v.site.Flavor, b.cfg.QueryTimeout)
	b.prepare(getlock.NewLock(getlock.Name(v.site.Database, v.site.Table, b.cfg.Name), v.site.Flavor), bound)
	return bound, nil
}

// ensureConn returns the lock connection, taking a fresh one from the pool
// when there is none. A connection that holds no lock and has been idle for
// half its wait_timeout is replaced first, before the server drops it.
// Errors are not classified, and a fresh connection that failed is left to
// the caller's done to discard.
//
// A fresh connection's transaction, if it came from the pool with one, is
// rolled back: left open (by COMMIT AND CHAIN, or a BEGIN sent as a
// statement) it would hold every later statement's change uncommitted, a
// renewal's too (issue 31), as the server would at the end of the session;
// the connection never goes back to the pool. Then its session gets its
// limits (lockSessionSQL) and, where a session may set them, TCP keepalive
// probes after waitTimeout of silence (getlock.Conn.Keepalive); refusals
// are remembered and not retried.
func (b *lockBackend) ensureConn(ctx context.Context) (*sql.Conn, error) {
	if b.lc.Conn != nil && !b.lc.Locked && b.cfg.Clock.Now().Sub(b.lastUsed) > b.waitTimeout/2 {
		b.lc.Discard()
	}
	if b.lc.Conn != nil {
		return b.lc.Conn, nil
	}
	b.wrote = 0
	c, err := b.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	b.lc.Conn = c
	if _, err := c.ExecContext(ctx, "ROLLBACK AND NO CHAIN NO RELEASE"); err != nil {
		return nil, err
	}
	if _, err := b.sql.session.Exec(ctx, c, stmt.Params{}); err != nil {
		return nil, err
	}
	if !b.noKeepalive {
		b.noKeepalive = !b.lc.Keepalive(ctx, b.waitTimeout)
	}
	if err := c.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&b.lc.ID); err != nil {
		return nil, err
	}
	b.lastUsed = b.cfg.Clock.Now()
	b.log.Debug("lock connection opened", "connection_id", b.lc.ID, "wait_timeout", b.waitTimeout)
	return b.lc.Conn, nil
}

// done ends a method that used the lock connection, with its error err:
// after an error the connection is discarded (its state on the server is
// unknown; closing it frees a lock it held) and the error classified;
// otherwise the connection's last use is recorded, for the idle limit.
// Without a lock connection (a statement ran on a pooled one) it only
// classifies.
func (b *lockBackend) done(err *error) {
	if *err != nil {
		*err = probe.Classify(b.lc.Fail(*err), b.cfg.Table)
	} else if b.lc.Conn != nil {
		b.lastUsed = b.cfg.Clock.Now()
	}
}

// releaseLock releases the lock held by the lock connection.
func (b *lockBackend) releaseLock(ctx context.Context) error {
	if b.lc.Conn == nil || !b.lc.Locked {
		return nil
	}
	held, err := b.lc.Release(ctx)
	if err == nil && !held {
		b.log.Warn("RELEASE_LOCK found the lock not held by this connection", "lock", b.lc.Lock.Name, "connection_id", b.lc.ID)
	}
	return err
}

// read reads the election's row on the lock connection; exists is false
// when there is none.
func (b *lockBackend) read(ctx context.Context, c *sql.Conn) (rec Record, exists bool, err error) {
	err = rec.scan(b.sql.read.QueryRow(ctx, c, b.params(0)))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{Election: b.cfg.Name}, false, nil
	}
	return rec, err == nil, err
}

// follow waits in GET_LOCK for the lock; once this candidate's connection
// holds it, the row's state decides how the row is taken (see claimOf), or
// whether the lock is let go (the step model/lock.pml calls yieldLock).
//
// takeNew: there is no row, and follow writes one naming this candidate.
// The previous holder may not know yet that the row was deleted: the hold
// waits out LockDelay; unless the election never existed (no term floor
// row: acquired = 'first'), when there is no previous holder.
func (b *lockBackend) follow(ctx context.Context, _ bool) (rec Record, bt beat, wait time.Duration, err error) {
	defer b.done(&err)
	c, err := b.ensureConn(ctx)
	if err != nil {
		return Record{}, beat{}, 0, err
	}
	if !b.lc.Locked {
		start := b.cfg.Clock.Now()
		got, woke, err := b.acquire(ctx)
		if err != nil {
			return Record{}, beat{}, 0, err
		}
		if !got {
			return b.watch(ctx, c, start, woke)
		}
	}
	// This connection holds the lock: no other candidate of this election
	// can write the row until it is released; only operators can.
	rec, exists, err := b.read(ctx, c)
	switch {
	case err != nil:
		return Record{}, beat{}, 0, err
	case exists && (rec.reservedFor(b.cfg.ID) || !rec.Released && rec.LeaseLeft > 0 && rec.ID != b.cfg.ID && rec.ConnectionID == 0):
		// Handed to another candidate (a transfer), whose window is
		// open; or (takeOthers) an operator named another candidate,
		// with a live lease: let the lock go so that it can take over
		// (yieldLock), and look again when its lease (or transfer window)
		// may run out.
		return rec, beat{}, b.retryWait(rec), b.releaseLock(ctx)
	}
	// takeNew (no row), or takeFree, takeOurs, takeOthers: the take,
	// unless the row changed since it was read (an operator's write).
	s, p, delay := b.sql.insert, b.params(0), b.cfg.LockDelay
	if exists {
		s, p.Term = b.sql.take, rec.Term
		p.Acquired, delay = b.claimOf(rec)
	}
	term, first, err := b.write(ctx, c, s, p)
	if err != nil || term == 0 {
		return rec, beat{}, 0, err
	}
	if first && !exists {
		delay = 0
	}
	b.wrote = term
	return rec, beat{held: true, term: term, delay: delay}, 0, nil
}

// acquire takes the lock if it is free, else waits up to lockWait for its
// holder to let go and then tries again. woke reports that the holder let
// go (or nobody held the lock) but another connection took it first.
//
// A waiter never queues for the lock itself: it waits with pass, which the
// server ends by handing the lock on at once, and takes it with GET_LOCK(name,
// 0) only from its own goroutine, when it can act on it. A waiter queued
// for the lock would get it from the server even while its process is
// frozen (SIGSTOP, a paused VM): it could neither take the row nor let the
// lock go, and the election would wait for the server to drop its idle
// connection, about a lease, after a Resign or a Transfer.
func (b *lockBackend) acquire(ctx context.Context) (got, woke bool, err error) {
	if got, err = b.lc.Get(ctx, b.lc.Lock.TryLock); err != nil || got {
		return got, false, err
	}
	r, err := b.lc.PassOn(ctx, b.sql.pass)
	if err != nil || r == getlock.PassTimeout {
		return false, false, err
	}
	got, err = b.lc.Get(ctx, b.lc.Lock.TryLock)
	return got, !got, err
}

// watch reports who leads while another connection holds the lock, the
// wait for it that began at start having ended: the next follow waits
// again at once (but never spins, should the server have ignored the
// timeout). woke means the holder let go but another waiter got the lock:
// the next follow then comes at once.
//
// A row that does not exist (an operator's DELETE, or the first election)
// is written at once, naming this candidate but no lock connection, as an
// operator's Assume would (the placeholder, below): the lock holder may be
// a connection that nobody uses any more (a leader cut off from the
// database), which the server drops only after wait_timeout, and the lock
// delay of the row counts from this write, not from when this candidate
// gets the lock.
//
// The placeholder names this candidate, without holding the lock; watch
// then reports the row as it now is. Like an operator's Assume, it names
// no lock connection: a lock holder that finds it lets the lock go for
// this candidate (see takeOthers), which takes the row once it gets the
// lock and leads a lock delay after this write (see takeOurs). If this
// candidate never gets the lock, the row expires after its lease and the
// election goes on. Another candidate's row, written meanwhile, is left
// alone. It is not this connection's write, so b.wrote (which claimOf
// trusts) is left as it is: it names no connection and holds no lock
// (lock.pml's watch leaves wrote).
//
// It is safe for the same reason as the table backend's insert: every
// earlier hold's last renewal ran before this write (the row was gone), so
// its holder stands down, by its clock, RenewDeadline after it, before the
// lock delay ends; and no hold can begin on this row but this candidate's.
func (b *lockBackend) watch(ctx context.Context, c *sql.Conn, start time.Time, woke bool) (Record, beat, time.Duration, error) {
	rec, exists, err := b.read(ctx, c)
	if err == nil && !exists {
		if _, _, err = b.write(ctx, c, b.sql.placeholder, b.params(0)); err == nil {
			rec, _, err = b.read(ctx, c) // none again only after an operator's DELETE
		}
	}
	switch {
	case err != nil:
		return Record{}, beat{}, 0, err
	case woke:
		return rec, beat{}, 0, nil
	}
	return rec, beat{}, max(b.lockWait-b.cfg.Clock.Now().Sub(start), 0), nil
}

// claimOf says how follow, holding the lock, takes rec, a row it does not
// let go for another candidate: as what (the row's acquired) and with what
// lock delay.
//
//   - takeFree: a row that was released or has expired by the database
//     clock is taken with no lock delay.
//   - takeOthers: a live row that names another candidate, which a lock
//     holder wrote, is taken after what is left of the writer's lease (see
//     holderGone).
//   - takeOurs: a live row that names this candidate. An operator named
//     this candidate; the previous holder may not know yet, unless this
//     very connection held the lock since it wrote the row.
func (b *lockBackend) claimOf(rec Record) (acquired string, delay time.Duration) {
	switch {
	case rec.Released && rec.Transfer && rec.TransferTo == b.cfg.ID:
		return "transferred", 0 // handed to this candidate
	case rec.Released:
		return "released", 0
	case rec.LeaseLeft <= 0:
		return "expired", 0
	case rec.ID != b.cfg.ID:
		return "lock", b.holderGone(rec)
	case rec.ConnectionID == b.lc.ID && rec.Term == b.wrote, rec.ConnectionID == 0 && rec.Acquired == "first":
		// This very connection wrote the row and held the lock since:
		// nobody else can have led, and this candidate stood down. Or
		// this candidate's placeholder for an election that never
		// existed, taken with its term (the take requires it): nobody
		// led before it, nor since.
		return "claimed", 0
	case rec.ConnectionID != 0:
		return "claimed", b.holderGone(rec)
	}
	return "claimed", b.sinceWritten(rec)
}

// sinceWritten is the lock delay of taking a live row that names this
// candidate and that no lock holder wrote (an operator's Assume or REPLACE,
// or this candidate's placeholder): LockDelay counted from that write, by
// the database clock (the row's lease began with it). Every hold before the
// write has had its last renewal before it, since the write replaced its
// term, and no hold began after it, since a take would have changed the
// term that the take of this row requires: so every earlier holder stands
// down RenewDeadline after the write at the latest. The lock may come to
// this candidate long after the write: when it was held by a connection
// that nobody uses any more (a leader cut off from the database), the
// server frees it only after wait_timeout, about a lease.
//
// The row's last_seen_active is what the writer stored, which may be
// earlier than the write: a plain REPLACE with NOW() stores whole seconds.
// A time with no fraction is so trusted less one second (Assume and the
// placeholder write SYSDATE(6), microseconds); a row whose stored time is
// further in the past than the write is an operator's mistake this does not
// cover.
func (b *lockBackend) sinceWritten(rec Record) time.Duration {
	elapsed := rec.Lease - rec.LeaseLeft
	if rec.LastRenewal.Nanosecond() == 0 {
		elapsed = max(elapsed-time.Second, 0) // maybe NOW(), truncated
	}
	return max(b.cfg.LockDelay-elapsed, 0)
}

// holderGone is the lock delay of taking a live row that a lock holder
// wrote, now that this connection holds the lock: the writer's connection
// no longer does (killed, crashed, dropped), and the writer stands down by
// its clock before its lease ends.
//
// During an adoption period the writer may instead be a recipe node that
// took the row over (its statement leaves connection_id as it was), which
// stands down only when the recipe's timeout ran out: the hold waits out
// the row's whole lease, which is at least the adopted one.
func (b *lockBackend) holderGone(rec Record) time.Duration {
	if b.adopt > 0 {
		return max(rec.LeaseLeft, 0)
	}
	return min(rec.LeaseLeft, b.cfg.LockDelay)
}

// write runs s, a take or an insert, with p on c in one transaction with
// the election's term floor (floor.InTx), which gives :floor and :insert,
// and returns the term it wrote, or 0 when an operator wrote the row first
// (the take changed no row, or the insert found one), and whether the
// election had no term floor row (an insert is then acquired = 'first').
// The caller records a term its connection holds the lock with (b.wrote).
// With an error, term and first mean nothing.
func (b *lockBackend) write(ctx context.Context, c *sql.Conn, s stmt.Stmt, p stmt.Params) (term uint64, first bool, err error) {
	err = floor.InTx(ctx, c, b.sql.floor, b.cfg.Name, func(tx floor.Tx, floor uint64, none bool) (uint64, error) {
		// During an adoption period a recipe node may have created and
		// led the election without a floor row: no insert is a first.
		term, first = 0, none && b.adopt == 0
		p.Floor, p.First = floor, first
		res, err := s.Exec(ctx, tx, p)
		if mysqlerr.Errno(err) == 1062 { // ER_DUP_ENTRY
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return 0, err
		}
		// LAST_INSERT_ID(term) came back in the OK packet, else the row
		// is read (nobody else writes it while this connection holds the
		// lock but operators).
		if id, err := res.LastInsertId(); err == nil && id > 0 {
			term = uint64(id)
			return term, nil
		}
		err = tx.QueryRowContext(ctx, `SELECT LAST_INSERT_ID()`).Scan(&term)
		return term, err
	})
	if err != nil {
		return 0, false, err // the COMMIT may have failed after the term was read
	}
	return term, first, nil
}

func (b *lockBackend) renew(ctx context.Context, hold uint64) (beat, error) {
	bt, err := b.renewOnce(ctx, hold)
	if err != nil && b.lc.Conn == nil && ctx.Err() == nil && !probe.Permanent(err) {
		// The lock connection failed (and was discarded): the lock may
		// have gone with it. Try once on a fresh connection, which keeps
		// the term only if it gets the lock back at once.
		b.log.Debug("lock connection failed while renewing; retrying on a fresh one", "term", hold, "err", err)
		bt, err = b.renewOnce(ctx, hold)
	}
	return bt, err
}

func (b *lockBackend) renewOnce(ctx context.Context, hold uint64) (bt beat, err error) {
	defer b.done(&err)
	c, err := b.ensureConn(ctx)
	if err != nil {
		return beat{}, err
	}
	if mine, err := b.keepLock(ctx, hold); err != nil || !mine {
		return beat{}, err
	}
	switch n, err := b.sql.renew.Affected(ctx, c, b.params(hold)); {
	case err != nil:
		return beat{}, err
	case n != 1:
		return b.renewLost(ctx, c, hold)
	}
	b.wrote = hold
	return beat{held: true, term: hold}, nil
}

// keepLock reports whether the lock connection holds the lock, taking it
// back at once if it lost it (with its connection) and nobody took it.
func (b *lockBackend) keepLock(ctx context.Context, hold uint64) (bool, error) {
	if !b.lc.Locked {
		got, err := b.lc.Get(ctx, b.lc.Lock.TryLock)
		if err == nil && !got {
			b.log.Info("lock held by another connection", "term", hold)
		}
		return got, err
	}
	mine, err := b.lc.Mine(ctx)
	if err == nil && !mine {
		b.log.Warn("lock lost while its connection lives", "term", hold, "connection_id", b.lc.ID)
	}
	return mine, err
}

// renewLost handles a renewal of term hold that changed nothing: the row
// no longer names this candidate's term (replaced, released or deleted), or
// an operator asked for a transfer or a step-down.
func (b *lockBackend) renewLost(ctx context.Context, c *sql.Conn, hold uint64) (beat, error) {
	rec, exists, err := b.read(ctx, c)
	switch {
	case err != nil:
		return beat{}, err
	case exists && rec.ID == b.cfg.ID && rec.Term == hold && !rec.Released && rec.Transfer:
		return beat{requested: true, to: rec.TransferTo}, nil
	case exists:
		// Keep the lock: the next follow reads the row and either takes
		// it (it names this candidate) or lets the lock go.
		return beat{}, nil
	}
	// Deleted (a force re-election): write a row naming this candidate,
	// which the campaign marks released once it stood down, before the
	// lock is released; then a waiting candidate takes over at once.
	term, _, err := b.write(ctx, c, b.sql.insert, b.params(0))
	if err != nil || term == 0 {
		return beat{}, err
	}
	b.wrote = term
	return beat{held: true, term: term, inserted: true}, nil
}

// lost keeps the lock for the next follow to decide, unless drop: after a
// release (see writeRow), or a hold that ended past its deadline without
// one, it lets the lock go, so that a candidate that now sits out (Resign,
// an unhealthy check, a transfer) does not keep others from taking over
// until the server drops its idle connection. Whoever gets the lock next
// after a hold that was not released finds the row naming this candidate
// and waits out its lease (see holderGone). An error discards the
// connection, which releases the lock.
func (b *lockBackend) lost(ctx context.Context, drop bool) (err error) {
	if drop {
		err = b.releaseLock(ctx)
		b.done(&err)
	}
	return err
}

// writeRow runs w with p on the lock connection, or on a pooled one when
// there is none (backendBase.writeRow). After a holder's release, hand-off
// or hand-over, the lock is released (lost): a waiter that is not a
// hand-over's target gets it, finds the row reserved and lets it go
// (yieldLock, see follow). A row handed off with an unserved delay stays
// live, written by a connection that no longer holds the lock: the next
// lock holder waits out what is left of it (see holderGone). Without a
// lock connection (it failed, and the lock went with it) the statement
// still says the term is over, so that nobody waits for its lease (a no-op
// if the row was taken).
func (b *lockBackend) writeRow(ctx context.Context, w rowWrite, p stmt.Params) (changed bool, err error) {
	if b.lc.Conn == nil {
		return b.backendBase.writeRow(ctx, w, p)
	}
	defer b.done(&err)
	if w <= writeHandOver {
		return b.giveUpTx(ctx, b.lc.Conn, w, p)
	}
	n, err := b.held[w].conn.Affected(ctx, b.lc.Conn, p)
	return n == 1, err
}

func (b *lockBackend) close() {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.QueryTimeout)
	defer cancel()
	if err := b.releaseLock(ctx); err != nil { // none without the lock
		b.log.Debug("RELEASE_LOCK failed; closing the connection frees the lock", "err", err)
	}
	b.lc.Discard()
}
