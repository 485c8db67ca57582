package floor_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestInConnTx: on a pool (one of its connections, given back after) or
// on one connection, InConnTx commits body's statements when it succeeds,
// and rolls them back when it fails, returning body's error; either way
// the connection is left with no transaction open (information_schema's
// innodb_trx: MySQL has no @@in_transaction).
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
			var open, rows int
			// Two statements, the transactions first: a statement that reads t
			// is itself an InnoDB transaction while it runs.
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = CONNECTION_ID()`).Scan(&open); err != nil {
				t.Fatal(err)
			}
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM t WHERE k = ?`, c.key).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if open != 0 || rows != map[bool]int{false: 1, true: 0}[c.fail] {
				t.Errorf("%s: after InConnTx open InnoDB transactions = %d, rows = %d", c.key, open, rows)
			}
		}
	}
	check("conn", conn, conn)
	conn.Close()
	check("pool", db, db)
}

func TestMain(m *testing.M) { testdb.Main(m) }
