package election

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// lockRow is a state of an election's row before one of the lock backend's
// steps, as the lock model (model/lock.pml) tells states apart.
type lockRow struct {
	missing    bool
	never      bool    // with missing: the election never existed (no term floor row)
	id         string  // service_id
	mine       bool    // the term is the one the candidate holds (and wrote, on its connection)
	ago        int     // last_seen_active = NOW(6) - ago ms
	lease      int     // lease_ms (default 10000)
	released   bool    //
	transferTo *string // NULL when nil
	// conn is the row's connection_id: "me" (the candidate's lock
	// connection), "gone" (a connection that no longer exists), "" NULL
	// (no lock holder wrote it: an operator, or a placeholder).
	conn string
}

// lockWant is what the lock model's decision table says of a step: the
// statement's affected rows (-1: the step runs none), the row afterwards,
// who holds the lock, and the candidate's conclusion.
type lockWant struct {
	n        int64
	id       string // "" when the row must be gone
	acquired string // "" not checked
	term     string // "same", "new" (above the old one), "" not checked
	conn     string // "me", "gone", "" NULL
	released bool
	// transferTo afterwards: "NULL", or its value.
	transferTo string
	lockMine   bool // the candidate's connection still holds the lock
	// The conclusion.
	held, delay, inserted, requested bool
	to                               string
}

// TestLockConformance holds the lock backend's statements to the lock
// model's decision table (model/README.md, "The lock backend") on a real
// server. From every row state the model tells apart (missing, free,
// released, reserved for this candidate or another, live and written by a
// lock holder that is gone, by an operator, by this very connection; held
// with this candidate's term, asked to hand over, deposed), with the lock
// held by this candidate's connection, by another or by nobody, it runs the
// statement the table names (take, insert, placeholder, renew, release,
// hand-off, hand-over) and checks its affected rows and the row it leaves,
// then runs the backend's step (follow, renew, giveUp) from the
// same state and checks the row, the lock and what the candidate concludes.
// Terms are checked as "above the old one", not their values.
func TestLockConformance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	db.SetMaxOpenConns(0)
	const (
		me, other = "me", "other"
		live      = 1000  // ms since last_seen_active
		expired   = 20000 //
	)
	// The steps.
	const (
		follow      = "follow"       // the lock is free or this candidate's: take or insert, or yield
		watch       = "watch"        // another connection holds the lock: follow writes a placeholder or nothing
		renew       = "renew"        // holding the lock: the renewal, renewLost
		renewFresh  = "renew-fresh"  // the lock connection was lost: the retry on a fresh one
		release     = "release"      // giveUp(hold) marking the row released
		handOff     = "hand-off"     // giveUp(hold) with an unserved delay
		handOverTo  = "hand-over"    // giveUp(hold) handing over to "x"
		takeChanged = "take-changed" // the take of a row that changed since it was read
	)
	gives := map[string]surrender{
		release:    {},
		handOff:    {unserved: 3 * time.Second},
		handOverTo: {over: true, to: "x", window: 2 * time.Second},
	}
	cases := []struct {
		name   string
		step   string
		lockBy string // who holds the lock before: "me", "other", "" nobody
		row    lockRow
		want   lockWant
	}{
		// follow, the lock free (GET_LOCK(name, 0) gets it) or already this candidate's
		{"missing, never existed: first, leads at once", follow, "", lockRow{missing: true, never: true},
			lockWant{n: 1, id: me, acquired: "first", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"missing (deleted): insert after the lock delay", follow, "", lockRow{missing: true},
			lockWant{n: 1, id: me, acquired: "insert", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true, delay: true}},
		{"expired, another's: take", follow, "", lockRow{id: other, ago: expired, conn: "gone"},
			lockWant{n: 1, id: me, acquired: "expired", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"released: take", follow, "", lockRow{id: other, ago: live, released: true, conn: "gone"},
			lockWant{n: 1, id: me, acquired: "released", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"reserved for me: take", follow, "", lockRow{id: other, ago: live, lease: 2000, released: true, transferTo: strp(me), conn: "gone"},
			lockWant{n: 1, id: me, acquired: "transferred", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"reserved for another, window open: yield the lock", follow, "", lockRow{id: other, ago: live, lease: 2000, released: true, transferTo: strp("third"), conn: "gone"},
			lockWant{n: -1, id: other, term: "same", conn: "gone", released: true, transferTo: "third"}},
		{"reserved for another, window over: take", follow, "", lockRow{id: other, ago: 3000, lease: 2000, released: true, transferTo: strp("third"), conn: "gone"},
			lockWant{n: 1, id: me, acquired: "released", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"live, another's, its lock holder gone: take after its lease (holderGone)", follow, "", lockRow{id: other, ago: live, conn: "gone"},
			lockWant{n: 1, id: me, acquired: "lock", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true, delay: true}},
		{"live, another's, an operator's: yield the lock", follow, "", lockRow{id: other, ago: live},
			lockWant{n: -1, id: other, term: "same", conn: "", transferTo: "NULL"}},
		{"live, names me, an operator's: claim after the lock delay (sinceWritten)", follow, "", lockRow{id: me, ago: live},
			lockWant{n: 1, id: me, acquired: "claimed", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true, delay: true}},
		{"live, names me, a gone connection of mine: claim after its lease (holderGone)", follow, "", lockRow{id: me, ago: live, conn: "gone"},
			lockWant{n: 1, id: me, acquired: "claimed", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true, delay: true}},
		{"live, names me, written by this connection holding the lock: claim at once", follow, me, lockRow{id: me, mine: true, ago: live, conn: "me"},
			lockWant{n: 1, id: me, acquired: "claimed", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"expired, names me: take", follow, "", lockRow{id: me, ago: expired, conn: "gone"},
			lockWant{n: 1, id: me, acquired: "expired", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"changed since read: the take changes nothing", takeChanged, me, lockRow{id: other, ago: expired, conn: "gone"},
			lockWant{n: 0, id: other, term: "same", conn: "gone", transferTo: "NULL", lockMine: true}},
		// follow while another connection holds the lock
		{"held elsewhere, missing: a placeholder naming me, no connection", watch, other, lockRow{missing: true},
			lockWant{n: 1, id: me, acquired: "insert", term: "new", conn: "", transferTo: "NULL"}},
		{"held elsewhere, live: nothing", watch, other, lockRow{id: other, ago: live, conn: "gone"},
			lockWant{n: -1, id: other, term: "same", conn: "gone", transferTo: "NULL"}},
		// renew, holding the lock with the row's term
		{"mine, my term: renew", renew, me, lockRow{id: me, mine: true, ago: live, conn: "me"},
			lockWant{n: 1, id: me, term: "same", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"mine, a transfer to me: renew, cleared", renew, me, lockRow{id: me, mine: true, ago: live, conn: "me", transferTo: strp(me)},
			lockWant{n: 1, id: me, term: "same", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"mine, a transfer asked: no change, requested", renew, me, lockRow{id: me, mine: true, ago: live, conn: "me", transferTo: strp(other)},
			lockWant{n: 0, id: me, term: "same", conn: "me", transferTo: other, lockMine: true, requested: true, to: other}},
		{"mine, a step-down asked: no change, requested", renew, me, lockRow{id: me, mine: true, ago: live, conn: "me", transferTo: strp("")},
			lockWant{n: 0, id: me, term: "same", conn: "me", transferTo: "", lockMine: true, requested: true, to: ""}},
		{"another's (deposed): no change, the lock kept", renew, me, lockRow{id: other, ago: live},
			lockWant{n: 0, id: other, term: "same", conn: "", transferTo: "NULL", lockMine: true}},
		{"mine, released: no change, the lock kept", renew, me, lockRow{id: me, mine: true, ago: live, released: true, conn: "me"},
			lockWant{n: 0, id: me, term: "same", conn: "me", released: true, transferTo: "NULL", lockMine: true}},
		{"missing (deleted): insert, inserted", renew, me, lockRow{missing: true},
			lockWant{n: 0, id: me, acquired: "insert", term: "new", conn: "me", transferTo: "NULL", lockMine: true, held: true, inserted: true}},
		// renew after the lock connection was lost: a fresh one keeps the term only with the lock at once
		{"connection lost, lock free: renewed on a fresh one", renewFresh, "", lockRow{id: me, mine: true, ago: live, conn: "gone"},
			lockWant{n: 1, id: me, term: "same", conn: "me", transferTo: "NULL", lockMine: true, held: true}},
		{"connection lost, lock held elsewhere: not held", renewFresh, other, lockRow{id: me, mine: true, ago: live, conn: "gone"},
			lockWant{n: -1, id: me, term: "same", conn: "gone", transferTo: "NULL"}},
		// giving the row up, then the lock
		{"release: released", release, me, lockRow{id: me, mine: true, ago: live, conn: "me"},
			lockWant{n: 1, id: me, term: "same", conn: "me", released: true, transferTo: "NULL"}},
		{"release of a term no longer mine: nothing", release, me, lockRow{id: other, ago: live},
			lockWant{n: 0, id: other, term: "same", conn: "", transferTo: "NULL"}},
		{"hand-off of an unserved delay: live for the rest", handOff, me, lockRow{id: me, mine: true, ago: live, conn: "me", transferTo: strp(other)},
			lockWant{n: 1, id: me, term: "same", conn: "me", transferTo: "NULL"}},
		{"hand-over: released, reserved", handOverTo, me, lockRow{id: me, mine: true, ago: live, conn: "me"},
			lockWant{n: 1, id: me, term: "same", conn: "me", released: true, transferTo: "x"}},
	}
	const goneConn = 4000000000 // no connection has this id
	// backend is a candidate me of an election of its own, after its
	// preflight.
	backend := func(t *testing.T) (b *lockBackend, name string) {
		t.Helper()
		name = fmt.Sprintf("lockconf-%d", rand.Uint32())
		e, err := NewLock(db, Config{Name: name, ID: me, LeaseDuration: 10 * time.Second, Tuning: TuningConfig{RetryInterval: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		b = e.b.(*lockBackend)
		if _, err := b.preflight(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.close)
		return b, name
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, name := backend(t)
			lockName := b.lc.Lock.Name
			var err error

			// The lock: this candidate's connection, another's, or nobody's.
			var holder *sql.Conn
			if tc.lockBy == other {
				if holder, err = db.Conn(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = holder.Close() })
				var got int
				if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", lockName).Scan(&got); err != nil || got != 1 {
					t.Fatalf("GET_LOCK elsewhere: %d, %v", got, err)
				}
			}
			connect := func() {
				t.Helper()
				if _, err := b.ensureConn(ctx); err != nil {
					t.Fatal(err)
				}
				if tc.lockBy == me && !b.lc.Locked {
					if got, err := b.lc.Get(ctx, b.lc.Lock.TryLock); err != nil || !got {
						t.Fatalf("GET_LOCK: %v, %v", got, err)
					}
				}
			}
			// set writes the row, and returns its term.
			set := func() uint64 {
				t.Helper()
				if _, err := db.ExecContext(ctx, "DELETE FROM service_election WHERE anchor = ?", name); err != nil {
					t.Fatal(err)
				}
				// The election existed (a term floor row, below every
				// term the clock gives), unless the case says never.
				if _, err := db.ExecContext(ctx, "DELETE FROM service_election_floor WHERE anchor = ?", name); err != nil {
					t.Fatal(err)
				}
				if !tc.row.never {
					if _, err := db.ExecContext(ctx, "INSERT INTO service_election_floor (anchor, term_floor) VALUES (?, 1)", name); err != nil {
						t.Fatal(err)
					}
				}
				testdb.IntactFloor(t, db)
				if tc.row.missing {
					return 0
				}
				r := tc.row
				l := 10000
				if r.lease != 0 {
					l = r.lease
				}
				var to, conn any
				if r.transferTo != nil {
					to = *r.transferTo
				}
				switch r.conn {
				case "me":
					conn = b.lc.ID
				case "gone":
					conn = uint64(goneConn)
				}
				if _, err := db.ExecContext(ctx, `INSERT INTO service_election
  (anchor, service_id, term, last_seen_active, lease_ms, released, transfer_to, acquired, backend, connection_id)
  VALUES (?, ?, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000), NOW(6) - INTERVAL ? * 1000 MICROSECOND, ?, ?, ?, 'operator', 'lock', ?)`,
					name, r.id, r.ago, l, r.released, to, conn); err != nil {
					t.Fatal(err)
				}
				var term uint64
				if err := db.QueryRowContext(ctx, "SELECT term FROM service_election WHERE anchor = ?", name).Scan(&term); err != nil {
					t.Fatal(err)
				}
				if r.mine {
					b.wrote = term
				}
				return term
			}
			// check compares the row and the lock with the table's.
			check := func(what string, before uint64, n int64) {
				t.Helper()
				var id, acquired string
				var term uint64
				var to sql.NullString
				var conn sql.NullInt64
				var released bool
				err := db.QueryRowContext(ctx, "SELECT service_id, acquired, term, transfer_to, connection_id, released FROM service_election WHERE anchor = ?", name).
					Scan(&id, &acquired, &term, &to, &conn, &released)
				if err == sql.ErrNoRows {
					id = ""
				} else if err != nil {
					t.Fatal(err)
				}
				gotTerm := "same"
				switch {
				case tc.row.missing || term > before:
					gotTerm = "new"
				case term < before:
					gotTerm = fmt.Sprintf("lower (%d < %d)", term, before)
				}
				gotTo := "NULL"
				if to.Valid {
					gotTo = to.String
				}
				gotConn := ""
				switch {
				case conn.Valid && b.lc.Conn != nil && uint64(conn.Int64) == b.lc.ID:
					gotConn = "me"
				case conn.Valid && conn.Int64 == goneConn:
					gotConn = "gone"
				case conn.Valid:
					gotConn = fmt.Sprint(conn.Int64)
				}
				w := tc.want
				if id != w.id || (w.acquired != "" && acquired != w.acquired) || (w.term != "" && gotTerm != w.term) ||
					gotConn != w.conn || released != w.released || gotTo != w.transferTo {
					t.Errorf("%s: row (%s, %s, term %s, connection %q, released %v, transfer_to %s); want (%s, %s, term %s, connection %q, released %v, transfer_to %s)",
						what, id, acquired, gotTerm, gotConn, released, gotTo, w.id, w.acquired, w.term, w.conn, w.released, w.transferTo)
				}
				if n >= 0 && n != w.n {
					t.Errorf("%s: %d affected rows, want %d", what, n, w.n)
				}
			}

			// The statement the decision table names, run as it is.
			if tc.want.n >= 0 {
				connect()
				before := set()
				var s stmt.Stmt
				var p stmt.Params
				switch tc.step {
				case follow:
					switch {
					case tc.row.missing:
						s, p = b.sql.insert, b.params(0)
						p.Floor, p.First = 1, tc.row.never
					default:
						s, p = b.sql.take, b.params(0)
						p.Acquired, p.Term = tc.want.acquired, before
					}
				case takeChanged:
					s, p = b.sql.take, b.params(0)
					p.Acquired, p.Term = "expired", before-1
				case watch:
					s, p = b.sql.placeholder, b.params(0)
					p.Floor, p.First = 1, tc.row.never
				case renew, renewFresh:
					s, p = b.sql.renew, b.params(before)
					if tc.row.missing {
						p.Hold = 1
					}
				case release, handOff, handOverTo:
					w, wp := gives[tc.step].stmt(b.params(before), b.adopt)
					s, p = b.held[w].conn, wp
				}
				n, err := s.Affected(ctx, b.lc.Conn, p)
				if err != nil {
					t.Fatalf("statement: %v", err)
				}
				if tc.want.inserted {
					// renewLost inserts after the renewal's 0 rows
					// (the step below): the statement leaves no row.
					if n != tc.want.n {
						t.Errorf("statement: %d affected rows, want %d", n, tc.want.n)
					}
				} else {
					check("statement", before, n)
				}
			}

			// The backend's step, from the same state.
			if tc.lockBy == me {
				b.close()
			}
			b.lc.Discard()
			connect()
			before := set()
			var bt beat
			switch tc.step {
			case follow, watch, takeChanged:
				if tc.step == takeChanged {
					// follow cannot be stopped between its read and its
					// take: the statement above is the step.
					break
				}
				_, bt, _, err = b.follow(ctx, false)
			case renew:
				bt, err = b.renew(ctx, before)
			case renewFresh:
				b.lc.Discard() // the lock connection failed
				bt, err = b.renew(ctx, before)
			case release, handOff, handOverTo:
				err = giveUp(ctx, b, before, gives[tc.step])
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.step, err)
			}
			if tc.step != takeChanged {
				check(tc.step, before, -1)
			}
			var holderID sql.NullInt64
			if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName).Scan(&holderID); err != nil {
				t.Fatal(err)
			}
			mine := holderID.Valid && b.lc.Conn != nil && uint64(holderID.Int64) == b.lc.ID
			if tc.step != takeChanged && mine != tc.want.lockMine {
				t.Errorf("%s: the lock held by this connection: %v, want %v", tc.step, mine, tc.want.lockMine)
			}
			got := lockWant{held: bt.held, delay: bt.delay > 0, inserted: bt.inserted, requested: bt.requested, to: bt.to}
			want := lockWant{held: tc.want.held, delay: tc.want.delay, inserted: tc.want.inserted, requested: tc.want.requested, to: tc.want.to}
			if got != want {
				t.Errorf("%s: held %v, lock delay %v, inserted %v, requested %v (to %q); want %v, %v, %v, %v (%q)",
					tc.step, got.held, got.delay, got.inserted, got.requested, got.to, want.held, want.delay, want.inserted, want.requested, want.to)
			}
		})
	}

	// A placeholder (watch) names no lock connection and is written
	// without the lock: it is not this connection's write (b.wrote;
	// wrote[c] in model/lock.pml, which watch leaves). Only a row this very
	// connection wrote holding the lock is claimed without a lock delay:
	// after an operator stamps the placeholder with the candidate's live
	// connection id (its term unchanged), the claim still waits
	// (holderGone).
	t.Run("placeholder, then stamped with my connection: claim after its lease (holderGone)", func(t *testing.T) {
		b, name := backend(t)
		holder, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		if _, err := holder.ExecContext(ctx, "DO GET_LOCK(?, 0)", b.lc.Lock.Name); err != nil {
			t.Fatal(err)
		}
		if _, bt, _, err := b.follow(ctx, false); err != nil || bt.held {
			t.Fatalf("watch: held %v, %v", bt.held, err)
		}
		rec, err := ReadRecord(ctx, db, "service_election", name)
		if err != nil || rec.ID != me || rec.ConnectionID != 0 || b.wrote == rec.Term {
			t.Fatalf("placeholder %+v (b.wrote %d), %v; want naming me, no connection, not this connection's write", rec, b.wrote, err)
		}
		if _, err := db.ExecContext(ctx, "UPDATE service_election SET connection_id = ? WHERE anchor = ?", b.lc.ID, name); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.ExecContext(ctx, "DO RELEASE_LOCK(?)", b.lc.Lock.Name); err != nil {
			t.Fatal(err)
		}
		if _, bt, _, err := b.follow(ctx, false); err != nil || !bt.held || bt.delay <= 0 {
			t.Errorf("follow with the lock: held %v, lock delay %v, %v; want held after a lock delay", bt.held, bt.delay, err)
		}
	})
}
