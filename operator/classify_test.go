package operator

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/probe"
)

// TestClassify: an action's server error, classified by probe.Classify as
// the election's statements are, wraps the sentinel that names its cause
// and the table, a missing database being a missing table; other
// errors, and errors that wrap a sentinel already, are returned as they are.
func TestClassify(t *testing.T) {
	o := &Operator{table: "db1.elections"}
	for _, tc := range []struct {
		number uint16
		want   error
	}{
		{1146, election.ErrTableMissing},
		{1049, election.ErrTableMissing},
		{1045, election.ErrAccessDenied},
		{1142, election.ErrAccessDenied},
		{1054, election.ErrSchemaMismatch},
		{1298, election.ErrUnknownTimeZone},
	} {
		server := &mysql.MySQLError{Number: tc.number, Message: "m"}
		err := probe.Classify(fmt.Errorf("floor: %w", server), o.table)
		if !errors.Is(err, tc.want) || !errors.Is(err, server) || errors.Is(err, election.ErrUnknownDatabase) ||
			err.Error() != tc.want.Error()+": db1.elections: floor: "+server.Error() {
			t.Errorf("classify(%d) = %v, want it to wrap %v and the server error", tc.number, err, tc.want)
		}
	}
	for _, err := range []error{
		errors.New("boom"),
		&mysql.MySQLError{Number: 1213, Message: "deadlock"},
		fmt.Errorf("%w: %w", election.ErrTableMissing, &mysql.MySQLError{Number: 1146, Message: "m"}),
	} {
		if got := probe.Classify(err, o.table); got != err {
			t.Errorf("classify(%v) = %v, want it as it is", err, got)
		}
	}
}
