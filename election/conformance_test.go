package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// rowState is a state of an election's row before a statement, as the
// heartbeat's decision tells states apart (doc.go, "The algorithm"; model/).
type rowState struct {
	missing    bool
	id         string  // service_id
	term       uint64  // 0: the default (the database clock)
	ago        int     // last_seen_active = NOW(6) - ago ms
	lease      int     // lease_ms
	released   bool    //
	transferTo *string // NULL when nil
	acquired   string  // "" for the column default ('operator')
	// floor is the election's term floor row (migration 6): "" at the
	// row's term (at the clock less a second when the row is missing: the
	// election existed), "none" for no floor row (it never existed: the
	// floor's marker counts none), "deleted" for none (a DBA deleted it: the
	// marker still counts it), "ahead" an hour ahead of the database clock
	// (the clock was set back, or a REPLACE wrote a term below the floor).
	floor string
}

func strp(s string) *string { return &s }

// decision is what the heartbeat must do from a rowState: the affected rows,
// the row afterwards, and the candidate's conclusion (its beat).
type decision struct {
	n        int64  // affected rows (clientFoundRows off)
	id       string // service_id afterwards ("" when the row is gone)
	acquired string // afterwards
	term     string // "same", or "new" (higher than before)
	// transferTo afterwards: "NULL", or its value.
	transferTo string
	// The candidate's conclusion.
	held, delay, inserted, requested bool
	to                               string
}

// TestHeartbeatConformance holds the table backend's heartbeat to its
// decision table on a real server: from every row state the decision
// distinguishes (missing, live or expired, released, reserved for this
// candidate or another, held by this candidate with its term or an old one,
// a request pending, an operator's row naming it), it runs the real
// statement and checks the affected rows, the row it leaves and what the
// candidate concludes (beat: leads now, after a lock delay, or not; asked to
// hand over). CI runs it on MariaDB 10.11 and 11.8 and MySQL 9.7.
func TestHeartbeatConformance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	const (
		me, other = "me", "other"
		lease     = 10000 // ms, every row's unless a case says
		held      = 7000  // the term "me" holds in holder cases
	)
	live, expired := 1000, 20000 // ms since last_seen_active
	cases := []struct {
		name string
		hold uint64 // the term the candidate holds; 0 for a follower
		row  rowState
		want decision
	}{
		{"missing, existed (deleted): insert after a lock delay", 0, rowState{missing: true},
			decision{n: 1, id: me, acquired: "insert", term: "new", transferTo: "NULL", held: true, delay: true, inserted: true}},
		{"missing, never existed (no floor): first, no lock delay", 0, rowState{missing: true, floor: "none"},
			decision{n: 1, id: me, acquired: "first", term: "new", transferTo: "NULL", held: true, inserted: true}},
		{"missing, floor ahead of the clock: insert above the floor", 0, rowState{missing: true, floor: "ahead"},
			decision{n: 1, id: me, acquired: "insert", term: "new", transferTo: "NULL", held: true, delay: true, inserted: true}},
		{"expired, floor ahead of the clock: take above the floor", 0, rowState{id: other, ago: expired, floor: "ahead"},
			decision{n: 2, id: me, acquired: "expired", term: "new", transferTo: "NULL", held: true}},
		{"names me, a REPLACE below the floor: claim above the floor after a lock delay", 0, rowState{id: me, ago: live, floor: "ahead"},
			decision{n: 2, id: me, acquired: "claimed", term: "new", transferTo: "NULL", held: true, delay: true}},
		{"live, another's, no floor (an earlier version's row): no change, floor created", 0, rowState{id: other, ago: live, floor: "none"},
			decision{n: 0, id: other, acquired: "operator", term: "same", transferTo: "NULL"}},
		{"live, another's: no change", 0, rowState{id: other, ago: live},
			decision{n: 0, id: other, acquired: "operator", term: "same", transferTo: "NULL"}},
		{"expired, another's: take", 0, rowState{id: other, ago: expired},
			decision{n: 2, id: me, acquired: "expired", term: "new", transferTo: "NULL", held: true}},
		{"expired, request pending: take, request cleared", 0, rowState{id: other, ago: expired, transferTo: strp("x")},
			decision{n: 2, id: me, acquired: "expired", term: "new", transferTo: "NULL", held: true}},
		{"released: take", 0, rowState{id: other, ago: live, released: true},
			decision{n: 2, id: me, acquired: "released", term: "new", transferTo: "NULL", held: true}},
		{"released, stepped down for anyone: take", 0, rowState{id: other, ago: live, released: true, transferTo: strp("")},
			decision{n: 2, id: me, acquired: "released", term: "new", transferTo: "NULL", held: true}},
		{"reserved for me: take", 0, rowState{id: other, ago: live, lease: 2000, released: true, transferTo: strp(me)},
			decision{n: 2, id: me, acquired: "transferred", term: "new", transferTo: "NULL", held: true}},
		{"reserved for another, window open: no change", 0, rowState{id: other, ago: live, lease: 2000, released: true, transferTo: strp("third")},
			decision{n: 0, id: other, acquired: "operator", term: "same", transferTo: "third"}},
		{"reserved for another, window over: take", 0, rowState{id: other, ago: 3000, lease: 2000, released: true, transferTo: strp("third")},
			decision{n: 2, id: me, acquired: "released", term: "new", transferTo: "NULL", held: true}},
		{"live, names me (an operator's REPLACE): claim after a lock delay", 0, rowState{id: me, ago: live},
			decision{n: 2, id: me, acquired: "claimed", term: "new", transferTo: "NULL", held: true, delay: true}},
		{"live, names me, a request pending: not claimed", 0, rowState{id: me, ago: live, transferTo: strp(other)},
			decision{n: 0, id: me, acquired: "operator", term: "same", transferTo: other}},
		{"expired, names me: take", 0, rowState{id: me, ago: expired},
			decision{n: 2, id: me, acquired: "expired", term: "new", transferTo: "NULL", held: true}},
		{"held by me with my term: renew", held, rowState{id: me, term: held, ago: live, acquired: "expired"},
			decision{n: 2, id: me, acquired: "expired", term: "same", transferTo: "NULL", held: true}},
		{"held by me, a transfer to me asked: renew, cleared", held, rowState{id: me, term: held, ago: live, acquired: "expired", transferTo: strp(me)},
			decision{n: 2, id: me, acquired: "expired", term: "same", transferTo: "NULL", held: true}},
		{"held by me, a transfer asked: no change, requested", held, rowState{id: me, term: held, ago: live, acquired: "expired", transferTo: strp(other)},
			decision{n: 0, id: me, acquired: "expired", term: "same", transferTo: other, requested: true, to: other}},
		{"held by me, a step-down asked: no change, requested", held, rowState{id: me, term: held, ago: live, acquired: "expired", transferTo: strp("")},
			decision{n: 0, id: me, acquired: "expired", term: "same", transferTo: "", requested: true, to: ""}},
		{"names me with an old term (replaced): claim after a lock delay", held, rowState{id: me, term: held - 1000, ago: live},
			decision{n: 2, id: me, acquired: "claimed", term: "new", transferTo: "NULL", held: true, delay: true}},
		{"another's, my term gone (deposed): no change", held, rowState{id: other, term: held + 1000, ago: live, acquired: "expired"},
			decision{n: 0, id: other, acquired: "expired", term: "same", transferTo: "NULL"}},
		{"missing while I hold (deleted): insert", held, rowState{missing: true},
			decision{n: 1, id: me, acquired: "insert", term: "new", transferTo: "NULL", held: true, delay: true, inserted: true}},
		{"missing while I hold, floor deleted too (by a DBA): insert", held, rowState{missing: true, floor: "deleted"},
			decision{n: 1, id: me, acquired: "insert", term: "new", transferTo: "NULL", held: true, delay: true, inserted: true}},
		{"mine, released by me: take anew", held, rowState{id: me, term: held, ago: live, released: true, acquired: "expired"},
			decision{n: 2, id: me, acquired: "released", term: "new", transferTo: "NULL", held: true}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("conform-%d", i) // the database is the test's own
			// setFloor sets the election's floor row as tc.row says, the
			// row's term being term (0 when missing), and returns it (0
			// for none).
			setFloor := func(term uint64) uint64 {
				t.Helper()
				if _, err := db.ExecContext(ctx, "DELETE FROM service_election_floor WHERE anchor = ?", name); err != nil {
					t.Fatal(err)
				}
				var floor uint64
				var err error
				switch tc.row.floor {
				case "none":
					testdb.IntactFloor(t, db)
					return 0
				case "ahead":
					err = db.QueryRowContext(ctx, "SELECT FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000) + 3600000000").Scan(&floor)
				case "", "deleted":
					floor = term
					if term == 0 {
						err = db.QueryRowContext(ctx, "SELECT FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000) - 1000000").Scan(&floor)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.ExecContext(ctx, "INSERT INTO service_election_floor (anchor, term_floor) VALUES (?, ?)", name, floor); err != nil {
					t.Fatal(err)
				}
				testdb.IntactFloor(t, db)
				if tc.row.floor == "deleted" {
					if _, err := db.ExecContext(ctx, "DELETE FROM service_election_floor WHERE anchor = ?", name); err != nil {
						t.Fatal(err)
					}
					return 0
				}
				return floor
			}
			var floor uint64 // the floor before the statement
			set := func() uint64 {
				t.Helper()
				if _, err := db.ExecContext(ctx, "DELETE FROM service_election WHERE anchor = ?", name); err != nil {
					t.Fatal(err)
				}
				if tc.row.missing {
					floor = setFloor(0)
					return 0
				}
				r := tc.row
				l := lease
				if r.lease != 0 {
					l = r.lease
				}
				acq := r.acquired
				if acq == "" {
					acq = "operator"
				}
				var to any
				if r.transferTo != nil {
					to = *r.transferTo
				}
				term := any(nil)
				if r.term != 0 {
					term = r.term
				}
				_, err := db.ExecContext(ctx, `INSERT INTO service_election
  (anchor, service_id, term, last_seen_active, lease_ms, released, transfer_to, acquired)
  VALUES (?, ?, COALESCE(?, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000)), NOW(6) - INTERVAL ? * 1000 MICROSECOND, ?, ?, ?, ?)`,
					name, r.id, term, r.ago, l, r.released, to, acq)
				if err != nil {
					t.Fatal(err)
				}
				var before uint64
				if err := db.QueryRowContext(ctx, "SELECT term FROM service_election WHERE anchor = ?", name).Scan(&before); err != nil {
					t.Fatal(err)
				}
				floor = setFloor(before)
				return before
			}
			e, err := NewTable(db, Config{Name: name, ID: me, LeaseDuration: 10 * time.Second, Tuning: TuningConfig{DisableFastHandover: true}})
			if err != nil {
				t.Fatal(err)
			}
			tb := e.b.(*tableBackend)

			// The statement: affected rows and the row it leaves.
			before := set()
			n, _, err := tb.beat(ctx, tc.hold)
			if err != nil {
				t.Fatalf("heartbeat: %v", err)
			}
			var id, acquired string
			var term uint64
			var to sql.NullString
			err = db.QueryRowContext(ctx, "SELECT service_id, acquired, term, transfer_to FROM service_election WHERE anchor = ?", name).
				Scan(&id, &acquired, &term, &to)
			if err != nil {
				t.Fatal(err)
			}
			gotTerm := "same"
			switch {
			case tc.row.missing:
				gotTerm = "new"
			case term > before:
				gotTerm = "new"
			case term < before:
				gotTerm = fmt.Sprintf("lower (%d < %d)", term, before)
			}
			gotTo := "NULL"
			if to.Valid {
				gotTo = to.String
			}
			// Every new term is above the floor, and the floor is at
			// least the row's term afterwards (the statement raised it).
			var after uint64
			if err := db.QueryRowContext(ctx, "SELECT term_floor FROM service_election_floor WHERE anchor = ?", name).Scan(&after); err != nil {
				t.Errorf("floor row after the heartbeat: %v", err)
			}
			if gotTerm == "new" && term <= floor {
				t.Errorf("new term %d, not above the floor %d", term, floor)
			}
			if after < term || after < floor {
				t.Errorf("floor %d after the heartbeat, below the row's term %d or the floor before (%d)", after, term, floor)
			}
			if n != tc.want.n || id != tc.want.id || acquired != tc.want.acquired || gotTerm != tc.want.term || gotTo != tc.want.transferTo {
				t.Errorf("statement: %d affected rows, row (%s, %s, term %s, transfer_to %s); want %d, (%s, %s, term %s, transfer_to %s)",
					n, id, acquired, gotTerm, gotTo, tc.want.n, tc.want.id, tc.want.acquired, tc.want.term, tc.want.transferTo)
			}

			// The candidate's conclusion, from the same state.
			set()
			b, err := tb.heartbeatOnce(ctx, tc.hold)
			if err != nil {
				t.Fatalf("heartbeatOnce: %v", err)
			}
			got := decision{held: b.held, delay: b.delay > 0, inserted: b.inserted, requested: b.requested, to: b.to}
			want := decision{held: tc.want.held, delay: tc.want.delay, inserted: tc.want.inserted, requested: tc.want.requested, to: tc.want.to}
			if got != want {
				t.Errorf("conclusion: held %v, lock delay %v, inserted %v, requested %v (to %q); want %v, %v, %v, %v (%q)",
					got.held, got.delay, got.inserted, got.requested, got.to, want.held, want.delay, want.inserted, want.requested, want.to)
			}
		})
	}
}

// backendOf returns the backend of e, a candidate NewTable or NewLock
// built.
func backendOf(e *Candidate) backend { return e.b }

// TestNoFirstDuringAdoption: during an adoption period a recipe node may
// have created and led an election without a term floor row (its
// statements know nothing of the floor), so an insert where there is no
// floor row is not a first election: it is an 'insert' and waits out the
// lock delay, on both backends' statements.
func TestNoFirstDuringAdoption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	e, err := NewTable(db, Config{Name: "7", ID: "me", LeaseDuration: 10 * time.Second, Tuning: TuningConfig{DisableFastHandover: true}})
	if err != nil {
		t.Fatal(err)
	}
	tb := backendOf(e).(*tableBackend)
	tb.adopt = 26000 // as adoptedMillis reads it during an adoption period
	b, err := tb.heartbeatOnce(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var acquired string
	if err := db.QueryRowContext(ctx, "SELECT acquired FROM service_election WHERE anchor = '7'").Scan(&acquired); err != nil {
		t.Fatal(err)
	}
	if acquired != "insert" || !b.held || b.delay == 0 {
		t.Errorf("table backend, adoption period, no floor row: acquired %q, beat %+v; want insert, held after a lock delay", acquired, b)
	}

	// The lock backend's insert, on a connection of its own.
	l, err := NewLock(db, Config{Name: "8", ID: "me", LeaseDuration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lb := backendOf(l).(*lockBackend)
	lb.adopt = 26000
	lb.prepare(getlock.Lock{}, stmt.Bound{})
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	term, first, err := lb.write(ctx, c, lb.sql.insert, lb.params(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT acquired FROM service_election WHERE anchor = '8'").Scan(&acquired); err != nil {
		t.Fatal(err)
	}
	if acquired != "insert" || term == 0 || first {
		t.Errorf("lock backend, adoption period, no floor row: acquired %q, term %d, first %v; want insert", acquired, term, first)
	}
}

// TestHeartbeatSimultaneousAssignment checks the heartbeat's one dependence
// on assignment order (probe.HeartbeatSQL: the first assignment decides, the
// others read the decision). Under MariaDB's SIMULTANEOUS_ASSIGNMENT every
// assignment reads the old row, whose decision is NULL (the CHECK
// constraint), so the statement must change nothing, not even on a row it
// would take (it fails on the CHECK constraint): never a leader by half a
// decision. Run's preflight refuses
// such a session with ErrSimultaneousAssignment.
func TestHeartbeatSimultaneousAssignment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		t.Skipf("SIMULTANEOUS_ASSIGNMENT is MariaDB's; server is %s", version)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"); err != nil {
		t.Fatal(err)
	}
	const name = "simultaneous" // the database is the test's own
	// Expired a minute ago: the heartbeat would take it.
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, term, last_seen_active, lease_ms, acquired)
VALUES (?, 'other', 5000000000000000, NOW(6) - INTERVAL 60 SECOND, 10000, 'expired')`, name); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO service_election_floor (anchor, term_floor) VALUES (?, 5000000000000000)", name); err != nil {
		t.Fatal(err)
	}
	e, err := NewTable(db, Config{Name: name, ID: "me", LeaseDuration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tb := e.b.(*tableBackend)
	p := tb.params(0)
	p.Floor = 5000000000000000
	query, args := tb.stmts.heartbeat.Bind(p)
	// MariaDB keeps the first of two assignments to decision there: the
	// row would keep a decision, which the CHECK constraint refuses, and
	// the statement fails (error 4025). Either way, nothing changes.
	res, err := conn.ExecContext(ctx, query, args...)
	var n int64
	if err == nil {
		n, _ = res.RowsAffected()
	} else if mysqlerr.Errno(err) != 4025 {
		t.Fatalf("heartbeat under SIMULTANEOUS_ASSIGNMENT: %v; want no error or the CHECK constraint's (4025)", err)
	}
	var id string
	var term uint64
	if err := db.QueryRowContext(ctx, "SELECT service_id, term FROM service_election WHERE anchor = ?", name).Scan(&id, &term); err != nil {
		t.Fatal(err)
	}
	t.Logf("heartbeat under SIMULTANEOUS_ASSIGNMENT: %d affected rows, error %v", n, err)
	if n != 0 || id != "other" || term != 5000000000000000 {
		t.Errorf("heartbeat under SIMULTANEOUS_ASSIGNMENT: %d affected rows, row (%s, %d); want 0, unchanged (other, 5000000000000000)", n, id, term)
	}
	// The same statement on an ordinary session takes the row.
	if res, err = db.ExecContext(ctx, query, args...); err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Errorf("heartbeat on an ordinary session: %d affected rows; want 2 (taken)", n)
	}
	if err := checkOf(probe.AssignmentOrder)(ctx, db); err != nil {
		t.Errorf("the assignment_order check on an ordinary session: %v", err)
	}
	simultaneous := testdb.Open(t, testdb.WithParams(t, dsn, map[string]string{"sql_mode": "'STRICT_TRANS_TABLES,SIMULTANEOUS_ASSIGNMENT'"}))
	if err := checkOf(probe.AssignmentOrder)(ctx, simultaneous); !errors.Is(err, ErrSimultaneousAssignment) {
		t.Errorf("the assignment_order check under SIMULTANEOUS_ASSIGNMENT: %v; want ErrSimultaneousAssignment", err)
	}
}

// checkOf is Run's preflight check of property prop (internal/probe).
func checkOf(prop string) func(context.Context, *sql.DB) error {
	for _, c := range probe.Checks(DefaultTable) {
		if c.Prop == prop {
			return c.Run
		}
	}
	panic("no preflight check " + prop)
}
