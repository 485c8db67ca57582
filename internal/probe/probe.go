// Package probe is Run's preflight, which package doctor reuses: the
// checks of the session, the schema and the topology (Checks, CheckPrivileges),
// the heartbeat probe of the server (RunHeartbeat, with the heartbeat's own
// text) and the errors they fail with, so that the doctor fails every
// server and session Run refuses, through the same code. election calls
// them at each Run's preflight; doctor reports on them.
package probe

import (
	"context"
	"database/sql"

	"github.com/sqlelect/sqlelect/internal/mysqlerr"
)

// The backends, as the doctor names them.
const (
	Table = "table"
	Lock  = "lock"
)

// The properties of Run's preflight checks, as the doctor names them.
const (
	FloorTable      = "floor_table"
	TimeZone        = "time_zone"
	Autocommit      = "autocommit"
	AssignmentOrder = "assignment_order"
	Sysdate         = "sysdate"
	Topology        = "topology"
)

// Privilege is a statement that fails with an access-denied error unless
// the user has privilege Name on the table, and touches no row.
type Privilege struct{ Name, Query string }

// Check is a check that Run's preflight makes and the doctor reports as
// property Prop.
type Check struct {
	// Pass is the doctor's detail on a pass; Consequence and Fix, on a
	// fail.
	Prop, Pass, Consequence, Fix string
	Backends                     []string
	Run                          func(ctx context.Context, db *sql.DB) error
}

// ScratchPrefix starts the names of the scratch elections the probes work
// in.
const ScratchPrefix = "sqlelect-doctor-"

// The candidates of the heartbeat probe.
const (
	A = "sqlelect-doctor-a"
	B = "sqlelect-doctor-b"
)

// IsCheckViolation reports whether err is a CHECK constraint's refusal
// (MariaDB's 4025, MySQL's 3819).
func IsCheckViolation(err error) bool {
	n := mysqlerr.Errno(err)
	return n == 4025 || n == 3819
}
