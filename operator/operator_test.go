package operator_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/operator"
)

// TestNew: New takes the default table for "", and refuses an invalid
// table or a nil db, as the functions it replaces did on every call.
func TestNew(t *testing.T) {
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, tc := range []struct {
		db    *sql.DB
		table string
		want  error
		name  string // the table the Operator acts on
	}{
		{db, "", nil, election.DefaultTable},
		{db, "app.elections", nil, "app.elections"},
		{db, "bad table", election.ErrInvalidConfig, ""},
		{nil, "", election.ErrNilDB, ""},
	} {
		op, err := operator.New(tc.db, tc.table)
		if !errors.Is(err, tc.want) || err == nil && op.Table() != tc.name {
			t.Errorf("New(%v, %q) = %v, %v; want %v on table %q", tc.db != nil, tc.table, op, err, tc.want, tc.name)
		}
	}
}
