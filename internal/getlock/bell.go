package getlock

import (
	"context"
	"database/sql"
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
// lock (BellSQL) on a connection of its own that waits in SELECT SLEEP,
// so that whoever requests a planned change of leader can wake it (Ring):
// the KILL QUERY ends the sleep, and the leader renews at once instead of
// at its next renewal. The renewal alone decides what happens; a ring only
// makes it come early.
//
// Only the bell's connection ever holds the bell's lock, and it runs
// nothing but the bell's statement, so a ring never ends another
// statement. It is never given back to the pool: a ring that comes after
// the bell stopped finds the thread gone (connection ids are not reused).
// The connection is taken as the handover hint's (Hint.Take): skipped, and
// counted, when the pool has none to spare. Every failure only costs
// speed: the leader acts at its next renewal. Start is called again only
// once the previous stop returned; Free between the two.
type Bell struct {
	Hint                // its Lock is not used
	Table string        // the election's table (its name is Hint.Election)
	Every time.Duration // the longest sleep: a thread left behind holds the lock no longer
	// Sleep waits d on the caller's clock and reports whether ctx is
	// still live: the wait before taking a connection again.
	Sleep func(ctx context.Context, d time.Duration) bool

	id uint64 // the connection's CONNECTION_ID(), for Free
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

// Free ends, on the server, the sleep of the connection a stopped bell
// last used: the driver only closes a connection whose statement is
// cancelled, and the server keeps the bell's lock until the sleep ends
// (within Every), which keeps the next leader from taking it meanwhile. One
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
// between two sleeps (a round trip's time in Every) is missed.
func (b *Bell) serve(ctx context.Context, rang chan<- struct{}) {
	// It sleeps Every while it holds the lock, else (a bell that a
	// stopped leader's thread still holds: its Free has not come yet, or
	// never comes) bellRetry before it tries again.
	name := BellSQL(b.Table, b.Election)
	sleep := fmt.Sprintf("SELECT SLEEP(IF(IF(IS_USED_LOCK(%s) <=> CONNECTION_ID(), 1, GET_LOCK(%s, 0)) = 1, %.3f, %.3f))",
		name, name, b.Every.Seconds(), min(b.Every, bellRetry).Seconds())
	c := Conn{Log: b.Log}
	defer c.Discard()
	for ctx.Err() == nil {
		err := b.open(ctx, &c)
		if err == nil && c.Conn != nil {
			var slept sql.NullInt64
			qctx, cancel := context.WithTimeout(ctx, b.Every+b.Timeout)
			err = c.Conn.QueryRowContext(qctx, sleep).Scan(&slept)
			cancel()
			if mysqlerr.Errno(err) == mysqlerr.QueryInterrupted || slept.Int64 == 1 { // rung
				select {
				case rang <- struct{}{}:
				default:
				}
				err = nil
			}
		}
		if err != nil && ctx.Err() == nil {
			b.Fail(c.Fail(err))
			b.Log.Debug("transfer bell failed", "err", err)
		}
		if c.Conn == nil && !b.Sleep(ctx, b.Every) {
			return
		}
	}
}

// open takes the bell's connection, when it has none and the pool has one
// to spare, and reads its id; c.Conn is nil when it has none.
func (b *Bell) open(ctx context.Context, c *Conn) error {
	if c.Conn != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	if ok, err := b.Take(ctx, c); !ok {
		return err
	}
	return c.Conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&b.id)
}
