//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/sqlelect/sqlelect/election"
)

// Compound faults, half-open connections, a long row lock and a second
// database: the classes of issue 12, which single faults that cut
// connections never reach.
const (
	// A partition of the leader (frozen without closing: it leads by its
	// clock until its renew deadline) whose sessions the server drops,
	// then operator actions while it still leads:
	kindOpAssumeResign   = "op_assume_resign"   // Assume/REPLACE a follower F, F resigns during its lock delay
	kindOpAssumeShutdown = "op_assume_shutdown" // Assume/REPLACE F, F is shut down (SIGTERM) during its lock delay
	kindOpReelectReelect = "op_reelect_reelect" // Reelect/DELETE, a follower inserts, Reelect/DELETE again
	kindOpAssumeReelect  = "op_assume_reelect"  // Assume/REPLACE F, F claims, Reelect/DELETE
	// Half-open connections:
	kindNetHalfOpen     = "net_halfopen"      // every connection of the leader frozen, none closed
	kindNetHalfOpenWake = "net_halfopen_wake" // the leader's handover-lock connections frozen, then it is deposed
	// The Batcher's connection frozen right after its SELECT … FOR UPDATE
	// SKIP LOCKED ran (the server keeps the transaction and its row locks).
	kindNetHalfOpenBatch = "net_halfopen_batch"
	// A transaction holds the election's row lock for ten leases while an
	// unrelated client keeps connecting.
	kindRowLock = "row_lock"
	// The same election name in a second database of the server.
	kindTwoDB = "two_db"
)

// others returns the running, not frozen candidates other than l.
func (c *cluster) others(l *slot) []*slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*slot
	for _, s := range c.slots {
		if s != l && s.proc != nil && s.proc.running() && !s.proc.stopped {
			out = append(out, s)
		}
	}
	return out
}

// assume forces id to lead with Operator.Assume or the recipe's REPLACE.
func (c *cluster) assume(ctx context.Context, db *sql.DB, id string) (string, error) {
	if c.rng.IntN(2) == 0 {
		_, err := ops(db).Assume(ctx, c.name, id)
		return "assume " + id, err
	}
	err := operatorExec(ctx, db,
		"REPLACE INTO service_election (anchor, service_id, last_seen_active) VALUES (?, ?, NOW(6))", c.name, id)
	return "replace " + id, err
}

// operatorExec runs an operator's plain-SQL statement (REPLACE, DELETE,
// the transfer UPDATE) as RELIABILITY.md advises on a certification-based
// cluster, and as Assume and Reelect do: a write conflict (Galera's and
// Group Replication's 1213, Group Replication's 3101 and 1180) changed
// nothing, so it is tried again, three tries in all.
func operatorExec(ctx context.Context, db *sql.DB, query string, args ...any) error {
	var err error
	for range 3 {
		_, err = db.ExecContext(ctx, query, args...)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1213 && me.Number != 3101 && me.Number != 1180 {
			return err
		}
	}
	return err
}

// reelect forces a re-election with Operator.Reelect or a DELETE.
func (c *cluster) reelect(ctx context.Context, db *sql.DB) (string, error) {
	if c.rng.IntN(2) == 0 {
		_, err := ops(db).Reelect(ctx, c.name)
		if errors.Is(err, election.ErrNoLeader) {
			err = nil
		}
		return "reelect", err
	}
	err := operatorExec(ctx, db, "DELETE FROM service_election WHERE anchor = ?", c.name)
	return "delete", err
}

// rowState is what the suite watches of the election's row.
type rowState struct {
	exists   bool
	id       string
	term     uint64
	acquired string
	seen     string // last_seen_active, as the server prints it
}

func (c *cluster) readRow(ctx context.Context, db *sql.DB) (rowState, error) {
	var r rowState
	var term sql.NullInt64
	var acq, seen sql.NullString
	err := db.QueryRowContext(ctx, "SELECT service_id, term, acquired, CAST(last_seen_active AS CHAR) FROM service_election WHERE anchor = ?", c.name).
		Scan(&r.id, &term, &acq, &seen)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	r.exists, r.term, r.acquired, r.seen = err == nil, uint64(term.Int64), acq.String, seen.String
	return r, err
}

// beforeRenewal returns just before the next renewal of the row's holder
// (renewals come every RenewInterval, not jittered): it waits for one, up to
// two intervals, then for an interval less 20 ms. Deleting the row then
// lets the holder find it gone before a follower's next look does.
func (c *cluster) beforeRenewal(ctx context.Context, db *sql.DB) string {
	r0, _ := c.readRow(ctx, db)
	seen := c.waitRow(ctx, db, 2*c.tm.RenewInterval, func(r rowState) bool {
		return r.exists && r.id == r0.id && r.seen != r0.seen
	})
	c.pause(c.tm.RenewInterval - 20*time.Millisecond)
	return r0.id + " renewed " + seen
}

// waitRow polls the row every 10 ms until ok says so, for at most within,
// and says what it saw.
func (c *cluster) waitRow(ctx context.Context, db *sql.DB, within time.Duration, ok func(rowState) bool) string {
	start := time.Now()
	deadline := start.Add(within)
	for {
		r, err := c.readRow(ctx, db)
		if err == nil && ok(r) {
			return fmt.Sprintf("after %v", time.Since(start).Round(time.Millisecond))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Sprintf("not seen in %v (%+v, %v)", within, r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// opCompound partitions the leader l (every connection frozen, none closed:
// it still leads by its clock until its renew deadline), has the server
// drop its sessions (KILL through adminOf(l), as wait_timeout or an operator
// would: its row and lock locks go, it notices nothing), runs the operator
// steps of kind through admin() at once, keeps the partition for a lease
// and heals it.
func opCompound(kind string, admin func() *sql.DB, adminOf func(*slot) *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		id := l.proc.id
		if l.hole == nil {
			return id, errors.New("the slot has no hole relay")
		}
		l.hole.set(holeAll)
		healed := false
		defer func() {
			if !healed {
				l.hole.set(holeOpen)
			}
		}()
		ctx, cancel := context.WithTimeout(c.ctx, opStatementTime)
		defer cancel()
		notes := []string{"partition " + id}
		var failed error
		// step notes what was done and reports whether it failed.
		step := func(s string, err error) bool {
			notes = append(notes, s)
			failed = err
			return err != nil
		}
		fail := func(err error) (string, error) { return strings.Join(notes, ", "), err }
		n, err := killConnections(ctx, adminOf(l), l.user)
		if step(fmt.Sprintf("kill %d sessions", n), err) {
			return fail(failed)
		}
		others := c.others(l)
		if len(others) == 0 {
			return fail(errors.New("no other running candidate"))
		}
		f := others[c.rng.IntN(len(others))]
		fid := f.proc.id
		db := admin()
		claim := 2*c.tm.RetryInterval + c.tm.QueryTimeout
		if kind == kindOpReelectReelect {
			if step(c.reelect(ctx, db)) {
				return fail(failed)
			}
			// A follower inserts a new row and waits out its lock delay.
			notes = append(notes, "new row "+c.waitRow(ctx, db, claim, func(r rowState) bool { return r.exists }))
			notes = append(notes, c.beforeRenewal(ctx, db))
			if step(c.reelect(ctx, db)) {
				return fail(failed)
			}
		} else {
			if step(c.assume(ctx, db, fid)) {
				return fail(failed)
			}
			// F claims the row (a new term, acquired "claimed") and
			// waits out its lock delay.
			notes = append(notes, fid+" claimed "+c.waitRow(ctx, db, claim, func(r rowState) bool {
				switch r.acquired { // what a take writes (not "operator", nor a REPLACE's default)
				case "claimed", "expired", "released", "lock":
					return r.exists && r.id == fid
				}
				return false
			}))
			switch kind {
			case kindOpAssumeResign:
				if step("resign "+fid, c.signal(f, syscall.SIGUSR1)) {
					return fail(failed)
				}
			case kindOpAssumeShutdown:
				if step("sigterm "+fid, c.signal(f, syscall.SIGTERM)) {
					return fail(failed)
				}
			case kindOpAssumeReelect:
				notes = append(notes, c.beforeRenewal(ctx, db))
				if step(c.reelect(ctx, db)) {
					return fail(failed)
				}
			}
		}
		// The partitioned leader's lease ends by its clock; let the others
		// settle, then heal (what it sent meanwhile arrives late).
		c.pause(c.tm.Lease + 500*time.Millisecond)
		l.hole.set(holeOpen)
		healed = true
		if kind == kindOpAssumeShutdown {
			if err := c.waitExit(f, 10*time.Second); err != nil {
				return fail(err)
			}
			c.start(f)
		}
		return fail(nil)
	}
}

// netHalfOpen freezes every connection of the leader without closing any
// for two bounds, then heals: what either side sent meanwhile arrives late.
// The server keeps the leader's sessions meanwhile (as it would for a host
// that is gone, until wait_timeout), with whatever locks they hold: the
// others must still elect a leader within the bound of the fault's start
// (Config.FromStart).
func netHalfOpen(c *cluster, l *slot) (string, error) {
	id := l.proc.id
	if l.hole == nil {
		return id, errors.New("the slot has no hole relay")
	}
	l.hole.set(holeAll)
	c.pause(2*c.tm.bound() + c.jitter(time.Second))
	l.hole.set(holeOpen)
	return id, nil
}

// netHalfOpenBatch freezes the leader's connection that runs a Batcher's
// renewal right after its SELECT … FOR UPDATE SKIP LOCKED went through (or,
// when no batch comes within 3 s, every connection), for two bounds: the
// server keeps that transaction and its row locks meanwhile, and the others
// must still elect leaders within the bound of the fault's start
// (Config.FromStart).
func netHalfOpenBatch(c *cluster, l *slot) (string, error) {
	id := l.proc.id
	if l.hole == nil {
		return id, errors.New("the slot has no hole relay")
	}
	defer l.hole.set(holeOpen)
	how := id + " batch connection frozen after SKIP LOCKED"
	select {
	case <-l.hole.armAfter("SKIP LOCKED"):
	case <-time.After(3 * time.Second):
		l.hole.set(holeAll)
		how = id + " all connections frozen (no batch in 3 s)"
	case <-c.ctx.Done():
		return id, c.ctx.Err()
	}
	c.took = time.Now() // liveness counts from the freeze, not from the wait for it
	c.pause(2*c.tm.bound() + c.jitter(time.Second))
	return how, nil
}

// netHalfOpenWake freezes the leader's handover-lock (wake) connections
// (table backend), deposes it at once (Assume or REPLACE naming another
// candidate) so that it lets the lock go on a frozen connection, and heals
// after longer than the checker's StuckAfter: a Run that waits on the frozen
// connection without a deadline makes no heartbeat meanwhile (stuck).
func netHalfOpenWake(admin func() *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		id := l.proc.id
		if l.hole == nil {
			return id, errors.New("the slot has no hole relay")
		}
		l.hole.set(holeWake)
		defer l.hole.set(holeOpen)
		others := c.others(l)
		if len(others) == 0 {
			return id, errors.New("no other running candidate")
		}
		ctx, cancel := context.WithTimeout(c.ctx, opStatementTime)
		defer cancel()
		s, err := c.assume(ctx, admin(), others[c.rng.IntN(len(others))].proc.id)
		if err != nil {
			return id + ", " + s, err
		}
		c.pause(c.tm.bound() + 2*time.Second)
		return id + " wake frozen, " + s, nil
	}
}

// rowLockHold is how long rowLock holds the row: ten leases.
func (tm timings) rowLockHold() time.Duration { return 10 * tm.Lease }

// rowLock has an operator's transaction hold the election row's lock
// (SELECT … FOR UPDATE through admin()) for ten leases, while an unrelated
// client (probeDSN, a user of its own, not through any proxy) opens a new
// connection and runs a query every 200 ms. Any probe that fails is a
// server finding: abandoned election statements waiting on the lock must
// not fill the server.
func rowLock(admin func() *sql.DB, probeDSN string) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		hold := c.tm.rowLockHold()
		ctx, cancel := context.WithTimeout(c.ctx, hold+time.Minute)
		defer cancel()
		probe, err := sql.Open("mysql", probeDSN)
		if err != nil {
			return "", err
		}
		defer probe.Close()
		probe.SetMaxIdleConns(0) // a new connection for every query
		db := admin()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return "", err
		}
		defer func() { _ = tx.Rollback() }()
		var who string
		err = tx.QueryRowContext(ctx, "SELECT service_id FROM service_election WHERE anchor = ? FOR UPDATE", c.name).Scan(&who)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", err
		}
		start := time.Now()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var tries, fails, peak int
		var first error
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
				var one int
				err := probe.QueryRowContext(qctx, "SELECT 1").Scan(&one)
				var name string
				var threads int
				if e := db.QueryRowContext(qctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &threads); e == nil {
					peak = max(peak, threads)
				}
				qcancel()
				tries++
				if err != nil {
					fails++
					if first == nil {
						first = err
					}
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		c.pause(hold)
		err = tx.Rollback()
		close(stop)
		wg.Wait()
		target := fmt.Sprintf("row of %s locked %v; probe %d of %d failed; peak %d connections",
			who, time.Since(start).Round(time.Millisecond), fails, tries, peak)
		if fails > 0 {
			c.record(Record{Event: "probe_failed", Time: start,
				Detail: fmt.Sprintf("%d of %d new connections failed while the row was locked (first: %v); peak %d connections", fails, tries, first, peak)})
		}
		return target, err
	}
}

// side is a second election of the same name in another database of the
// same server, whose candidates run during each two_db fault.
type side struct {
	c     *cluster
	admin *sql.DB
	used  bool
}

// twoDatabases runs the side election's candidates for two bounds: it must
// elect its own leader within the bound (a fault record of its own), and
// the main election must not lose its leader over it.
func twoDatabases(sd *side) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		sd.used = true
		now := time.Now()
		sd.c.record(Record{Event: "fault", Kind: kindTwoDB, Time: now, End: now, Target: "start"})
		for _, s := range sd.c.slots {
			sd.c.start(s)
		}
		c.pause(2 * c.tm.bound())
		var errs []error
		for _, s := range sd.c.slots {
			if err := sd.c.signal(s, syscall.SIGTERM); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := sd.c.waitExit(s, 10*time.Second); err != nil {
				errs = append(errs, err)
				_ = sd.c.signal(s, syscall.SIGKILL)
				<-s.proc.done
			}
		}
		return fmt.Sprintf("%d candidates of %q in a second database", len(sd.c.slots), sd.c.name), errors.Join(errs...)
	}
}
