package election

import (
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// The term floor's statements and transaction are internal/floor's; here,
// what they need from the package: the tables' names, the clock, and the
// errors preflight reports.

// newFloorStmts returns the floor statements of election table table (a
// Config's, whose defaults settings filled in: never empty), bounded by b,
// for a candidate whose lock delay is lockDelay.
func newFloorStmts(table string, b stmt.Bound, lockDelay time.Duration) floor.Stmts {
	return floor.NewStmts(quoteTable(table), quoteTable(floor.Table(table)), b, lockDelay, termNowSQL)
}
