// Package probe is Run's preflight, which package doctor reuses: the
// checks of the session and the schema (Checks, CheckPrivileges, Topology),
// the heartbeat probe of the server (RunHeartbeat, with the heartbeat's own
// text) and the errors they fail with, so that the doctor fails every
// server and session Run refuses, through the same code. election calls
// them at each Run's preflight; doctor reports on them.
package probe

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

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
)

// Privilege is a statement that fails with an access-denied error unless
// the user has privilege Name on the table, and touches no row.
type Privilege struct{ Name, Query string }

// Check is a check that Run's preflight makes and the doctor reports as
// property Prop.
type Check struct {
	Prop        string
	Backends    []string
	Run         func(ctx context.Context, db *sql.DB) error
	Pass        string // the doctor's detail on a pass
	Consequence string // on a fail
	Fix         string
}

// Execer runs a statement: a *sql.DB, *sql.Conn or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// ScratchPrefix starts the names of the scratch elections the probes work
// in.
const ScratchPrefix = "sqlelect-doctor-"

// The candidates of the heartbeat probe.
const (
	A = "sqlelect-doctor-a"
	B = "sqlelect-doctor-b"
)

// Heartbeat is what the heartbeat statement reported in the probe's five
// steps, and whether the table refused a decision written outside the
// heartbeat.
type Heartbeat struct {
	Counts     [5]int64
	Term, Took uint64 // the terms of the insert and of the takeover
	Renewed    uint64 // the term the renewal reported (LAST_INSERT_ID): Term
	// Guarded: the table refused decision = 'renewed' written by another
	// statement (its CHECK constraint, enforced on this session). A value
	// left in the column would make a heartbeat that decides nothing count
	// as a change (2 affected rows).
	Guarded bool
}

func (p Heartbeat) String() string {
	s := make([]string, len(p.Counts))
	for i, n := range p.Counts {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, ", ")
}

// OK reports whether the server answered as MySQL and MariaDB do, and
// whether it counts found rows (CLIENT_FOUND_ROWS): the affected rows are
// 1, 2, 0 (1 under CLIENT_FOUND_ROWS), 1, 2.
func (p Heartbeat) OK() (ok, foundRows bool) {
	c := p.Counts
	foundRows = c[2] == 1
	c[2] = 0
	return c == [5]int64{1, 2, 0, 1, 2} && p.Took > p.Term, foundRows
}

// Problem says what in p, besides the affected rows (OK), breaks the
// heartbeat's decision: "" when nothing does.
func (p Heartbeat) Problem() string {
	switch {
	case p.Renewed != p.Term:
		return fmt.Sprintf("the renewal reported term %d for a row of term %d: the decision column's ENUM is not "+
			"('renewed', 'expired', 'claimed', 'released', 'transferred') in that order, so a renewal counts as a take", p.Renewed, p.Term)
	case !p.Guarded:
		return "the decision column took a value written outside the heartbeat: its CHECK constraint (decision IS NULL) " +
			"is missing or not enforced (MySQL: NOT ENFORCED; MariaDB: check_constraint_checks=0), and a value left " +
			"there makes a heartbeat that changes nothing count as a renewal"
	}
	return ""
}

// IsCheckViolation reports whether err is a CHECK constraint's refusal
// (MariaDB's 4025, MySQL's 3819).
func IsCheckViolation(err error) bool {
	n := mysqlerr.Errno(err)
	return n == 4025 || n == 3819
}
