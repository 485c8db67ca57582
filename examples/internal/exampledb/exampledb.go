// Package exampledb gives the examples a database with the election table:
// the one SQLELECT_DSN names, or else a throwaway MariaDB or MySQL server
// started from the binaries on this machine (package internal/mysqld), as
// examples/demo does.
package exampledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	_ "github.com/go-sql-driver/mysql" // the driver the examples use

	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/schema"
)

// EnvDSN names the variable holding the DSN of an existing server.
const EnvDSN = "SQLELECT_DSN"

// Database is the database created on a throwaway server.
const Database = "sqlelect_examples"

// DSN returns the DSN of a database with the election table migrated to the
// latest version: $SQLELECT_DSN when set, and otherwise a database on a
// throwaway server started now and stopped (its data deleted) by cleanup.
// cleanup is never nil; call it when done, also after an error.
func DSN(ctx context.Context) (dsn string, cleanup func(), err error) {
	cleanup = func() {}
	dsn = os.Getenv(EnvDSN)
	if dsn == "" {
		srv, err := mysqld.Start(ctx, mysqld.Options{})
		if err != nil {
			if errors.Is(err, mysqld.ErrNoServer) {
				return "", cleanup, fmt.Errorf("%w\n(or set %s to the DSN of a database, e.g. root@tcp(127.0.0.1:3306)/app)", err, EnvDSN)
			}
			return "", cleanup, err
		}
		cleanup = func() { _ = srv.Stop() }
		admin, err := sql.Open("mysql", srv.DSN(""))
		if err != nil {
			return "", cleanup, err
		}
		_, err = admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+Database)
		admin.Close()
		if err != nil {
			return "", cleanup, err
		}
		dsn = srv.DSN(Database)
	}
	if err := Migrate(ctx, dsn); err != nil {
		return "", cleanup, err
	}
	return dsn, cleanup, nil
}

// Migrate creates or updates the election table with package schema. Several
// processes may migrate at once: golang-migrate serializes them with a lock.
func Migrate(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := schema.New(db).Up(ctx); err != nil && !errors.Is(err, schema.ErrNoChange) {
		return err
	}
	return nil
}
