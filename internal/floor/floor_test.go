package floor_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestInConnTx: on a pool (one of its connections, given back after) or
// on one connection, InConnTx commits body's statements when it succeeds,
// and rolls them back when it fails, returning body's error; either way
// the connection is left with no transaction open (SET TRANSACTION would
// fail: MySQL has no @@in_transaction, and information_schema's innodb_trx
// is a cache that a read within 100 ms of the last does not refresh).
func TestInConnTx(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := testdb.Open(t, testdb.DSN(t))
	db.SetMaxOpenConns(1) // the pool's statements below run on InConnTx's connection
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (k VARCHAR(20) PRIMARY KEY) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() }) // closed below, before the pool's turn
	errBody := errors.New("body failed")
	check := func(what string, on stmt.Execer, q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) {
		for _, c := range []struct {
			key  string
			fail bool
		}{{what + "-ok", false}, {what + "-fail", true}} {
			err := floor.InConnTx(ctx, on, func(c2 *sql.Conn) error {
				if _, err := c2.ExecContext(ctx, `INSERT INTO t VALUES (?)`, c.key); err != nil {
					return err
				}
				if c.fail {
					return errBody
				}
				return nil
			})
			if c.fail != errors.Is(err, errBody) || !c.fail && err != nil {
				t.Errorf("%s: InConnTx = %v", c.key, err)
			}
			// SET TRANSACTION fails (1568) inside a transaction, and sets
			// here what the next one has anyway.
			if _, err := on.ExecContext(ctx, `SET TRANSACTION READ WRITE`); err != nil {
				t.Errorf("%s: after InConnTx a transaction is open: %v", c.key, err)
			}
			var rows int
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM t WHERE k = ?`, c.key).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != map[bool]int{false: 1, true: 0}[c.fail] {
				t.Errorf("%s: after InConnTx rows = %d", c.key, rows)
			}
		}
	}
	check("conn", conn, conn)
	conn.Close()
	check("pool", db, db)
}

// TestTakeFirstUnderReadCommitted (safety): a take that finds its
// election's floor row missing decides whether the election never existed
// (first: its insert leads without the lock delay) only under the
// marker's lock, which every transaction that creates a floor row holds.
// Under REPEATABLE READ the floor row's read locks the gap where the row
// would be; a caller's session under READ COMMITTED (a DSN's
// transaction_isolation, or the server's default) takes no gap lock, and
// another transaction can create the row and commit while the take waits
// for the marker. The take must then see that row, not call a first
// election a first (which, after an operator's DELETE of the row its new
// leader had just written, would lead at once beside that leader).
func TestTakeFirstUnderReadCommitted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	testdb.IntactFloor(t, db)
	name := fmt.Sprintf("rc-first-%d", time.Now().UnixNano())
	conn, err := db.Conn(ctx) // the candidate's, under READ COMMITTED
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.ExecContext(ctx, `SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED`); err != nil {
		t.Fatal(err)
	}
	other, err := db.BeginTx(ctx, nil) // another candidate's first election of name
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback() //nolint:errcheck // committed below
	if _, err := other.ExecContext(ctx, `SELECT term_floor FROM service_election_floor WHERE anchor = '' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type took struct {
		floor uint64
		first bool
		err   error
	}
	done := make(chan took, 1)
	go func() {
		var r took
		r.err = floor.InTxOnce(ctx, conn, floor.NewStmts("service_election", stmt.Bound{}, 0), name, func(_ floor.Tx, fl uint64, first bool) (uint64, error) {
			r.floor, r.first = fl, first
			return 0, nil
		})
		done <- r
	}()
	if r, ended := testdb.AwaitLockWait(t, ctx, db, done); ended { // the take waits for the marker
		t.Fatalf("the take ended before it was seen waiting for the marker: %+v", r)
	}
	for _, q := range []string{
		`INSERT INTO service_election_floor (anchor, term_floor) VALUES (?, 5)`,
		`UPDATE service_election_floor SET term_floor = term_floor + CRC32(?) WHERE anchor = ''`,
	} {
		if _, err := other.ExecContext(ctx, q, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.first || r.floor != 5 {
		t.Errorf("the take, after another transaction created the floor row at 5 while it waited for the marker: floor %d, first %v, error %v; want floor 5, not first", r.floor, r.first, r.err)
	}
}

func TestMain(m *testing.M) { testdb.Main(m) }

// TestTakeAllUsesKey: each statement of a set-based take (TakeAll) finds
// its rows by the primary key, for one election, a few, and a batch of 500
// in tables of 2,000 elections (each with a floor row and history), where
// a scan would lock every row it reads under REPEATABLE READ; but Close
// finds the history's open terms by open_terms, a range for one election
// (not each of its kept terms).
func TestTakeAllUsesKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := testdb.Elections(t, ctx, 2000)
	explain := testdb.Explain(t, ctx, db)
	f := floor.NewStmts("service_election", stmt.Bound{}, time.Second)
	for _, n := range []int{1, 5, 500} {
		names, terms := make([]string, n), make([]uint64, n)
		for i := range names {
			names[i], terms[i] = fmt.Sprintf("e-%d", i*3), uint64(i*3)
		}
		for what, query := range map[string]string{"ReadAll": f.ReadAll, "RaiseAll": f.RaiseAll, "CreateAll": f.CreateAll,
			"CountAll": f.CountAll, "ResumeAll": f.ResumeAll, "Close": f.Close, "Append": f.Append} {
			q, args := stmt.In(query, names, terms)
			for _, plan := range testdb.Rows(t, ctx, db, explain+q, args...) {
				key := "PRIMARY"
				if what == "Close" && plan["table"] == "h" {
					key = "open_terms"
				}
				if plan["table"] != "" && !strings.HasPrefix(plan["table"], "<") && // a derived or subquery's own row
					plan["select_type"] != "INSERT" && // MySQL's row for an INSERT's target
					(plan["key"] != key || plan["type"] == "index" || plan["type"] == "ALL") {
					t.Errorf("%s, %d names: the plan %v; want the rows of key %s", what, n, plan, key)
				}
				if what == "Close" && n == 1 && plan["table"] == "h" && plan["type"] != "range" {
					t.Errorf("Close, one name: the plan %v; want a range of open_terms", plan)
				}
			}
		}
	}
}
