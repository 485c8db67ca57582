package getlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqlerr"
)

// BellSQL returns a SQL expression whose value is the name of the
// user-level lock a leader of election name in table keeps as its bell
// (see Bell): "sqlelect.bell#" and the first 50 hex digits of the SHA-256
// of the database, a NUL byte, the table, a NUL byte and the name, where
// the database is table's qualifier or else the session's default one
// (DATABASE()), and the database and table are in lower case where the
// server compares table names without case (lower_case_table_names 1 or
// 2), as for WakeName. The server computes it, so that the leader, a
// ringer and plain SQL always name it alike. On a server with
// lower_case_table_names 0, for election 'orders' of service_election:
//
//	CONCAT('sqlelect.bell#', LEFT(SHA2(CONCAT(DATABASE(), CHAR(0),
//	  'service_election', CHAR(0), 'orders'), 256), 50))
//
// table and name are validated names, safe in a SQL string literal.
func BellSQL(table, name string) string {
	database, tbl := "DATABASE()", Literal(table)
	if db, t, ok := strings.Cut(table, "."); ok {
		database, tbl = Literal(db), Literal(t)
	}
	fold := func(s string) string { return "IF(@@lower_case_table_names = 0, " + s + ", LOWER(" + s + "))" }
	return "CONCAT('sqlelect.bell#', LEFT(SHA2(CONCAT(" + fold(database) + ", CHAR(0), " + fold(tbl) +
		", CHAR(0), " + Literal(name) + "), 256), 50))"
}

// Ring wakes the leader of election name in table when it keeps its bell:
// one statement, a KILL QUERY of the connection that holds the bell's lock
// (nothing when none does). A user may end its own user's statements; that
// of another user needs the CONNECTION_ADMIN (MySQL) or CONNECTION ADMIN
// (MariaDB) privilege, or SUPER, else error 1095. The caller ignores any
// error but logs it: the leader acts on the request at its next renewal.
func Ring(ctx context.Context, db *sql.DB, table, name string) error {
	_, err := db.ExecContext(ctx, "KILL QUERY IS_USED_LOCK("+BellSQL(table, name)+")")
	if mysqlerr.Errno(err) == mysqlerr.NoSuchThread { // nobody keeps the bell
		return nil
	}
	return err
}

// Bell is a leader's bell: while it leads, a candidate keeps the bell's
// lock (BellSQL) on a connection of its own that waits in GET_LOCK, so
// that whoever requests a planned change of leader can wake it (Ring): the
// KILL QUERY ends the wait, and the leader renews at once instead of at its
// next renewal. The renewal alone decides what happens; a ring only makes
// it come early.
//
// The bell's connection waits, Every (in whole seconds, at least one) at a
// time, for a lock that a second connection of the bell, its anchor, holds
// for the bell's life. It waits in GET_LOCK, not in SLEEP: on MariaDB a
// KILL of a thread that is leaving a SLEEP (its time ran out, or an
// earlier KILL woke it) keeps, for 2 s, the one mutex every SLEEP of the
// server waits on, so that each SLEEP on the server stalls that long; a
// GET_LOCK wait has a mutex of its own thread.
//
// Only the bell's connection ever holds the bell's lock, and it runs
// nothing but the bell's statement, so a ring never ends another
// statement. Neither connection is ever given back to the pool: a ring
// that comes after the bell stopped finds the thread gone (connection ids
// are not reused), and closing the anchor ends the bell's wait at once.
// Each connection is taken as the handover hint's (Hint.Take): skipped,
// and counted, when the pool has none to spare. Every failure only costs
// speed: the leader acts at its next renewal. Start is called again only
// once the previous stop returned; Free between the two.
type Bell struct {
	Hint                // its Lock is not used
	Table string        // the election's table (its name is Hint.Election)
	Every time.Duration // the longest wait (rounded up to whole seconds)
	// Sleep waits d on the caller's clock and reports whether ctx is
	// still live: the wait before taking a connection again.
	Sleep func(ctx context.Context, d time.Duration) bool

	id uint64 // the bell connection's CONNECTION_ID(), for Free
}

// Start keeps the bell in a goroutine of its own, which sends on rang,
// without blocking, each time the bell is rung (a ring left from an earlier
// start is dropped), having first freed what an earlier start left (see
// Free). stop ends it, and returns once the goroutine exited.
func (b *Bell) Start(rang chan struct{}) (stop func()) {
	select {
	case <-rang:
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Free(ctx)
		b.serve(ctx, rang)
	}()
	return func() {
		cancel()
		<-done
	}
}

// Free ends, on the server, the wait of the connection a stopped bell
// last used, should it still run (its anchor's close ends it too). One
// round trip, bounded by ctx and Timeout; none when there is nothing to
// free. Not while the bell runs.
func (b *Bell) Free(ctx context.Context) {
	if b.id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	_, err := b.DB.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", b.id))
	b.Log.Debug("transfer bell freed", "connection_id", b.id, "err", err)
	b.id = 0
}

// bellRetry is how long a bell that finds its lock held waits before it
// tries again: the previous leader frees it once its row is given up,
// which may come after this leader began (see Free).
const bellRetry = 20 * time.Millisecond

// serve keeps the bell until ctx ends (see Start). A ring that comes
// between two waits (a round trip's time in Every) is missed.
func (b *Bell) serve(ctx context.Context, rang chan<- struct{}) {
	name := BellSQL(b.Table, b.Election)
	secs := max(int64((b.Every+time.Second-1)/time.Second), 1)
	var c, anchor Conn // the bell's, and the anchor's
	c.Log, anchor.Log = b.Log, b.Log
	defer c.Discard()
	defer anchor.Discard()
	for ctx.Err() == nil {
		wait, err := b.open(ctx, &c, &anchor)
		if err == nil && wait != "" {
			// 0: the wait ended; -1: another thread holds the bell's
			// lock (a stopped leader's, see Free); 1: this one got the
			// anchor's lock (the anchor is gone); NULL, or an error 1317:
			// rung.
			var got sql.NullInt64
			qctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+b.Timeout)
			err = c.Conn.QueryRowContext(qctx, fmt.Sprintf("SELECT IF(IF(IS_USED_LOCK(%s) <=> CONNECTION_ID(), 1, GET_LOCK(%s, 0)) = 1, GET_LOCK(%s, %d), -1)",
				name, name, wait, secs)).Scan(&got)
			cancel()
			switch {
			case mysqlerr.Errno(err) == mysqlerr.QueryInterrupted || err == nil && !got.Valid: // rung
				select {
				case rang <- struct{}{}:
				default:
				}
				err = nil
			case err == nil && got.Int64 == 1:
				err = errors.New("getlock: the bell's anchor connection is gone")
			case err == nil && got.Int64 == -1 && !b.Sleep(ctx, bellRetry):
				return
			}
		}
		if err != nil && ctx.Err() == nil {
			b.Fail(c.Fail(err))
			anchor.Discard()
			b.Log.Debug("transfer bell failed", "err", err)
		}
		if c.Conn == nil && !b.Sleep(ctx, b.Every) {
			return
		}
	}
}

// open takes the bell's connection and its anchor, when it lacks them and
// the pool has them to spare, reads the bell connection's id, and has the
// anchor take its lock; it returns the anchor lock's name, a SQL literal,
// or "" (and no connection) when the pool has none to spare.
func (b *Bell) open(ctx context.Context, c, anchor *Conn) (wait string, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	if c.Conn == nil {
		anchor.Discard()
		if ok, err := b.Take(ctx, c); !ok {
			return "", err
		}
		if err := c.Conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&b.id); err != nil {
			return "", c.Fail(err)
		}
	}
	if anchor.Conn == nil {
		if ok, err := b.Take(ctx, anchor); !ok {
			c.Discard()
			return "", err
		}
		var got sql.NullInt64
		if err := anchor.Conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT('sqlelect.wait#', CONNECTION_ID()), 0), CONNECTION_ID()").Scan(&got, &anchor.ID); err != nil {
			c.Discard()
			return "", anchor.Fail(err)
		}
		if got.Int64 != 1 {
			c.Discard()
			return "", anchor.Fail(errors.New("getlock: the bell's anchor did not get its lock"))
		}
		anchor.Locked = true
	}
	return fmt.Sprintf("'sqlelect.wait#%d'", anchor.ID), nil
}
