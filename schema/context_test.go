package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"

	"github.com/sqlelect/sqlelect/internal/netfault"
	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/schema"
)

// deadline is the ctx deadline of the calls that must give up, and slack
// what a loaded machine may add before they return.
const deadline, slack = 2 * time.Second, 2 * time.Second

// bounded runs call with a ctx of deadline and checks that it returns
// ctx's error within deadline plus slack.
func bounded(t *testing.T, what string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > deadline+slack {
		t.Errorf("%s returned after %v: %v; want context.DeadlineExceeded within %v", what, took, err, deadline+slack)
	}
}

// deadServer is a server that accepts connections and never answers: the
// test server behind a proxy that drops every byte, both ways.
func deadServer(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testdb.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := netfault.Start(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.Blackhole(true)
	cfg.Addr = p.Addr()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestDeadServer: against a server that accepts TCP and never answers
// (issue 32: Open blocked for minutes, even with ?timeout=2s), every call
// returns ctx's error within its deadline.
func TestDeadServer(t *testing.T) {
	m := schema.New(deadServer(t))
	for name, call := range map[string]func(ctx context.Context) error{
		"Up":      m.Up,
		"Down":    m.Down,
		"Steps":   func(ctx context.Context) error { return m.Steps(ctx, 1) },
		"Force":   func(ctx context.Context) error { return m.Force(ctx, 1) },
		"Version": func(ctx context.Context) error { _, _, err := m.Version(ctx); return err },
		"Adopt":   func(ctx context.Context) error { _, err := m.Adopt(ctx, schema.AdoptOptions{}); return err },
		"Unadopt": m.Unadopt,
		"Adoption": func(ctx context.Context) error {
			_, _, err := m.Adoption(ctx)
			return err
		},
		"EndAdoption": m.EndAdoption,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bounded(t, name, call)
		})
	}
}

// TestContextBoundsWaits: on a live server, ctx bounds the waits a
// migration may meet: golang-migrate's lock, held here by golang-migrate's
// own mysql driver (the same lock: its CLI and sqlelect exclude each
// other), and a DDL statement queued behind a transaction. The Migrator
// works again once the wait is over; a migration interrupted in its DDL is
// left dirty, as a failed one.
func TestContextBoundsWaits(t *testing.T) {
	t.Run("lock", func(t *testing.T) {
		ctx, dsn, _, m := setup(t)
		drv, err := migratemysql.WithInstance(testdb.Open(t, dsn+"&multiStatements=true"),
			&migratemysql.Config{MigrationsTable: schema.MigrationsTable})
		if err != nil {
			t.Fatal(err)
		}
		if err := drv.Lock(); err != nil {
			t.Fatal(err)
		}
		bounded(t, "Up", m.Up)
		if err := drv.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := m.Up(ctx); err != nil {
			t.Fatalf("Up once the lock is free: %v", err)
		}
	})
	t.Run("ddl", func(t *testing.T) {
		ctx, _, db, m := setup(t)
		if err := m.Steps(ctx, 1); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil) // holds the table's metadata lock
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		if _, err := tx.ExecContext(ctx, "SELECT * FROM service_election"); err != nil {
			t.Fatal(err)
		}
		bounded(t, "Up", m.Up) // migration 2's ALTER TABLE waits for the transaction
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if v, dirty, err := m.Version(ctx); v != 2 || !dirty || err != nil {
			t.Errorf("Version() after the interrupted migration = %d, %v, %v; want 2, dirty", v, dirty, err)
		}
	})
}
