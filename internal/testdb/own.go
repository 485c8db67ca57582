package testdb

import (
	"context"
	"errors"
	"testing"

	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// OwnServer starts a throwaway server of the kind the tests run on
// (SQLELECT_TEST_SERVER) with args, for a test that changes its global
// settings, and returns it and the DSN of its migrated database sqlelect.
// It skips t when there is no server to start.
func OwnServer(t *testing.T, ctx context.Context, args ...string) (*mysqld.Server, string) {
	t.Helper()
	srv, err := mysqld.Start(ctx, mysqld.Options{ExtraArgs: args, Logf: t.Logf})
	if errors.Is(err, mysqld.ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if _, err := Open(t, srv.DSN("")).ExecContext(ctx, "CREATE DATABASE sqlelect"); err != nil {
		t.Fatal(err)
	}
	Migrate(t, srv.DSN("sqlelect"))
	return srv, srv.DSN("sqlelect")
}
