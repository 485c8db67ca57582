// Package probe is Run's preflight, which package doctor reuses: the
// checks of the session, the schema and the topology (Checks, CheckPrivileges),
// the heartbeat probe of the server (RunHeartbeat, with the heartbeat's own
// text) and the errors they fail with, so that the doctor fails every
// server and session Run refuses, through the same code. election calls
// them at each Run's preflight; doctor reports on them.
package probe

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sqlelect/sqlelect/internal/adoption"
	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/stmt"
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
	SelectLimit     = "select_limit"
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
	// run makes the check; or judge judges the session's settings, which
	// Run's preflight reads once for all such checks (readSession).
	run   func(ctx context.Context, db *sql.DB) error
	judge func(s session) error
}

// Run makes the check on db, on a read of its own for a check of the
// session's settings.
func (c Check) Run(ctx context.Context, db *sql.DB) error {
	if c.judge == nil {
		return c.run(ctx, db)
	}
	s, err := readSession(ctx, db)
	if err != nil {
		return err
	}
	return c.judge(s)
}

// session is what Run's preflight reads of the session and the server, in
// one statement (readSession): the settings the checks of the session
// judge, and what the server's getlock.Site is made of.
type session struct {
	dst                                       sql.NullInt64 // dbclock.DSTProbe
	timeZone, autocommit, completion, sqlMode string
	selectLimit                               uint64
	database                                  sql.NullString
	fold                                      int
	version                                   string
	start, sysdate                            string // NOW(6) and a later SYSDATE(6) (see judgeSysdate)
}

// readSession reads the session of one of db's connections, in a
// statement that fails unless each of peeks (statements that read no row)
// would succeed.
func readSession(ctx context.Context, db *sql.DB, peeks ...string) (s session, err error) {
	// SYSDATE(6) is the server's clock at the call, NOW(6) the statement's
	// start: they differ by microseconds at least (the statement is parsed
	// between the two), unless SYSDATE() is NOW(), as with --sysdate-is-now.
	// When they are equal all the same, the statement sleeps 2 ms before it
	// reads SYSDATE(6) again.
	where := " FROM DUAL WHERE 1"
	for _, p := range peeks {
		where += " AND NOT EXISTS (" + p + ")"
	}
	err = db.QueryRowContext(ctx, `SELECT `+dbclock.DSTProbe+`, @@SESSION.time_zone, @@autocommit, @@completion_type, @@SESSION.sql_mode,
  @@SESSION.sql_select_limit, `+getlock.SiteColumns+`, CAST(NOW(6) AS CHAR), IF(SYSDATE(6)<>NOW(6), 0, SLEEP(0.002)), CAST(SYSDATE(6) AS CHAR)`+where).Scan(
		&s.dst, &s.timeZone, &s.autocommit, &s.completion, &s.sqlMode, &s.selectLimit, &s.database, &s.fold, &s.version, &s.start, new(int), &s.sysdate)
	if err != nil {
		return session{}, fmt.Errorf("election: reading the session's settings: %w", err)
	}
	return s, nil
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

// The errors Run's preflight fails with. Package election exports each
// (election.ErrTableMissing is ErrTableMissing, and so on) and documents
// it; the texts are election's.
var (
	ErrTableMissing           = errors.New("election: table missing (run `sqlelect migrate up`)")
	ErrAccessDenied           = errors.New("election: access denied")
	ErrSchemaMismatch         = errors.New("election: table schema out of date (run `sqlelect migrate up`)")
	ErrUnsafeTimeZone         = errors.New("election: session time zone observes daylight saving time; set time_zone='+00:00' (DSN parameter time_zone=%27%2B00%3A00%27)")
	ErrUnsupportedTopology    = errors.New("election: unsupported topology")
	ErrUnknownDatabase        = errors.New("election: unknown database")
	ErrSimultaneousAssignment = errors.New("election: the session's sql_mode has SIMULTANEOUS_ASSIGNMENT; the heartbeat needs its SET list assigned left to right")
	ErrSysdateIsNow           = errors.New("election: the server runs with --sysdate-is-now: SYSDATE() cannot tell the server's clock from a session's SET @@timestamp")
	ErrNoAutocommit           = errors.New("election: the session does not commit each statement (autocommit=0 or completion_type=CHAIN)")
	ErrUnknownTimeZone        = errors.New("election: unknown session time zone (the DSN's time_zone)")
	ErrUnsafeServer           = errors.New("election: the server breaks a promise the election relies on (run `sqlelect doctor`)")
	ErrSelectLimit            = errors.New("election: the session's sql_select_limit cuts the election's reads short")
)

// Classify turns a driver error into a package error: permanent problems
// (missing table, missing privilege, outdated schema) wrap a sentinel so that
// Run can stop and say what to do; everything else is returned as it is and
// treated as transient ("not leader this tick"). Errors that already wrap
// the sentinel, and nil, are returned as they are. table names the
// statement's table, and a missing database is a missing table then; ""
// (election.Classify: a connection attempt, a migration) names none and
// leaves it ErrUnknownDatabase.
func Classify(err error, table string) error {
	var sentinel error
	switch mysqlerr.Errno(err) {
	case mysqlerr.NoSuchTable:
		sentinel = ErrTableMissing
	case 1049: // ER_BAD_DB_ERROR
		sentinel = ErrUnknownDatabase
		if table != "" {
			sentinel = ErrTableMissing
		}
	case mysqlerr.AccessDenied, mysqlerr.AccessDeniedNoPass, mysqlerr.SpecificAccessDenied,
		1044, 1142, 1143: // ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR
		sentinel = ErrAccessDenied
	case mysqlerr.BadField:
		sentinel = ErrSchemaMismatch
	case 1298: // ER_UNKNOWN_TIME_ZONE
		sentinel = ErrUnknownTimeZone
	default:
		return err
	}
	switch {
	case errors.Is(err, sentinel):
		return err
	case table == "":
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return fmt.Errorf("%w: %s: %w", sentinel, table, err)
}

// Permanent reports whether err cannot go away by retrying: Run stops on it.
func Permanent(err error) bool {
	return errors.Is(err, ErrTableMissing) || errors.Is(err, ErrAccessDenied) ||
		errors.Is(err, ErrSchemaMismatch) || errors.Is(err, ErrUnsafeTimeZone) ||
		errors.Is(err, ErrUnsupportedTopology) || errors.Is(err, ErrSysdateIsNow) ||
		errors.Is(err, ErrUnsafeServer) || errors.Is(err, ident.ErrInvalid) ||
		errors.Is(err, ErrSimultaneousAssignment) || errors.Is(err, ErrNoAutocommit) ||
		errors.Is(err, ErrUnknownTimeZone) || errors.Is(err, ErrSelectLimit)
}

// Layout explains an error of a statement on election table table, as
// Run's preflight does: it classifies err (Classify) and adds to an
// ErrSchemaMismatch what the table holds, so that a table of another
// layout (the MySQL-table recipe's, say) is named as such instead of only
// "out of date": the columns found and what to do. The recipe's table is
// told apart as `sqlelect migrate` does (adoption.Classify). Other errors,
// and a failure to read the columns, return the classified err.
func Layout(ctx context.Context, db *sql.DB, table string, err error) error {
	err = Classify(err, table)
	if !errors.Is(err, ErrSchemaMismatch) {
		return err
	}
	cols, qerr := adoption.Columns(ctx, db, table)
	if qerr != nil || len(cols) == 0 {
		return err
	}
	found := make([]string, len(cols))
	for i, c := range cols {
		found[i] = c.Name + " " + c.Type
	}
	hint := "`sqlelect migrate up` brings sqlelect's table up to date, or says what to do with another table"
	if adoption.Classify(cols) == adoption.KindRecipe {
		hint = "this is the MySQL-table recipe's table: `sqlelect migrate adopt` converts it in place, keeping its holder"
	}
	return fmt.Errorf("%w (columns found: %s; %s)", err, strings.Join(found, ", "), hint)
}

// Checks are the checks of Run's preflight on the session, the schema of
// election table table and the topology that retrying cannot fix.
func Checks(table string) []Check {
	bothBackends, tableOnly := []string{Table, Lock}, []string{Table}
	return []Check{
		{Prop: FloorTable, Backends: bothBackends, run: func(ctx context.Context, db *sql.DB) error {
			return checkFloorTable(ctx, db, table)
		}, Pass: "the term floor and history tables exist, and the user may read and write them",
			Consequence: "every term is assigned in a transaction with the floor table, and appended to the history: Run refuses to campaign without them",
			Fix:         "run `sqlelect migrate up` (or schema.DDL), and GRANT SELECT, INSERT, UPDATE on both"},
		{Prop: TimeZone, Backends: bothBackends, judge: judgeTimeZone,
			Pass:        "the session time zone has no daylight saving time",
			Consequence: "local times jump by an hour twice a year and leases with them: Run refuses it (ErrUnsafeTimeZone)",
			Fix:         "set time_zone='+00:00' in the DSN (time_zone=%27%2B00%3A00%27; the CLI does unless the DSN sets one)"},
		{Prop: Autocommit, Backends: bothBackends, judge: judgeCommits,
			Pass:        "the session commits each statement (autocommit=1, completion_type NO_CHAIN)",
			Consequence: "a renewal left uncommitted lets the leader believe while every other session sees its lease run out: Run refuses it (ErrNoAutocommit)",
			Fix:         "remove autocommit and completion_type from the DSN (and reset them before a connection goes back to the pool)"},
		{Prop: AssignmentOrder, Backends: tableOnly, judge: judgeAssignmentOrder,
			Pass:        "the session assigns a SET list left to right",
			Consequence: "the heartbeat decides in its first assignment and reads the decision in the others: it would never take a row, and Run refuses it (ErrSimultaneousAssignment)",
			Fix:         "remove SIMULTANEOUS_ASSIGNMENT from the DSN's sql_mode (or the server's default)"},
		{Prop: Sysdate, Backends: bothBackends, judge: judgeSysdate,
			Pass:        "SYSDATE(6) is the server's clock at each call",
			Consequence: "SYSDATE() is NOW(), which a session's SET @@timestamp moves: Run refuses it (ErrSysdateIsNow)",
			Fix:         "restart the server without --sysdate-is-now"},
		{Prop: SelectLimit, Backends: bothBackends, judge: judgeSelectLimit,
			Pass:        "the session returns every row a SELECT finds (sql_select_limit of 2^31 - 1 or more; the default is 2^64 - 1)",
			Consequence: "a read of many rows (a batch's, a shard group's holders) would miss some and act on the rest: Run refuses it (ErrSelectLimit)",
			Fix:         "remove sql_select_limit from the DSN, or set it to DEFAULT there (sql_select_limit=DEFAULT) when the server's init_connect sets it"},
		{Prop: Topology, Backends: []string{Lock}, run: checkTopology,
			Pass:        "neither a Galera node nor a multi-primary Group Replication member: both backends may be used",
			Consequence: "the lock backend could elect one leader per node; the table backend is safe here (its write conflicts are retried as \"not leader this tick\")",
			Fix:         "use the table backend (--backend table, election.NewTable); keep the nodes' clocks synchronized well within LeaseDuration - RenewDeadline"},
	}
}

// Preflight is Run's preflight on election table table for backend (Table
// or Lock), and returns the first error: peek (a statement that reads no
// row but needs every column the backend reads, those of the SELECT
// privilege's probe among them) explained by Layout, the other privileges
// (CheckPrivileges), the Checks of backend but the topology (those of the
// session on one read of it, which gives the server's site too), the
// heartbeat probe of the server (Server: the table backend's, and the lock
// backend's where that read failed), and for the lock backend its
// topology.
func Preflight(ctx context.Context, db *sql.DB, table, backend, peek string) (site getlock.Site, err error) {
	// One statement reads the session, makes the peeks of the election
	// table and of the floor's tables, and computes a term; when it fails,
	// each is made on its own, in the order below, so that the refusal
	// names its cause.
	fpeek := floor.NewStmts(table, stmt.Bound{}, 0).Peek
	s, err := readSession(ctx, db, peek, fpeek[0], fpeek[1], termPeek)
	peeked := err == nil
	if !peeked {
		if _, err := db.ExecContext(ctx, peek); err != nil {
			return site, Layout(ctx, db, table, err)
		}
	}
	tbl := ident.Quote(table)
	if err := checkGrants(ctx, db, tbl, candidatesNeed, Privileges(tbl)[1:3]); err != nil {
		return site, err
	}
	if !peeked {
		if s, err = readSession(ctx, db); err != nil {
			return site, err
		}
	}
	for _, c := range Checks(table) {
		// The heartbeat probe before the topology, the last check: a
		// server that cannot run the heartbeat is refused for that
		// (ErrUnsafeServer) before its variables are read, which such a
		// server may answer with an error that is no refusal. The lock
		// backend sends no heartbeat (the doctor's affected_rows is the
		// table backend's): it is probed only where the one read above
		// failed, which evaluates a term as both backends write them,
		// as go-mysql-server cannot.
		if c.Prop == Topology && (backend == Table || !peeked) {
			if err = Server(ctx, db, table); err != nil {
				return site, err
			}
		}
		if !slices.Contains(c.Backends, backend) {
			continue
		}
		switch {
		case c.judge != nil:
			err = c.judge(s)
		case c.Prop == FloorTable && peeked:
			err = floorGrants(ctx, db, table)
		default:
			err = c.run(ctx, db)
		}
		if err != nil {
			return site, err
		}
	}
	return getlock.NewSite(table, s.database.String, s.fold, s.version), nil
}

// termPeek reads no row, but computes a term as the backends' statements
// write one (above the database clock and a floor), which go-mysql-server
// cannot (its GREATEST takes no DECIMAL).
const termPeek = `SELECT 1 FROM DUAL WHERE GREATEST(` + dbclock.TermNow + `, 1) = 0`

// checkFloorTable fails, wrapping ErrSchemaMismatch, when election table
// table has no term floor table or no history table (the migrations are
// behind: run them before upgrading candidates), and wrapping
// ErrAccessDenied when the user may not write them (checkGrants, as
// CheckPrivileges).
func checkFloorTable(ctx context.Context, db *sql.DB, table string) error {
	peek := floor.NewStmts(table, stmt.Bound{}, 0).Peek
	for i, t := range []string{floor.Table(table), floor.History(table)} {
		_, err := db.ExecContext(ctx, peek[i])
		what := []string{"the term floor table %s is missing (schema version 6)", "the history table %s is missing (schema version 10)"}[i]
		switch mysqlerr.Errno(err) {
		case 0:
			continue
		case mysqlerr.NoSuchTable:
		case mysqlerr.BadField:
			what = []string{"the term floor table %s has no column marked_at (schema version 8)", "the history table %s, or the term floor's column terms, is missing (schema version 10)"}[i]
		default:
			return Classify(err, t)
		}
		return fmt.Errorf("%w: "+what+": run `sqlelect migrate up` (or add it to your migrations: schema.DDL) before starting candidates of this version: %w",
			ErrSchemaMismatch, t, err)
	}
	return floorGrants(ctx, db, table)
}

// floorGrants is checkFloorTable's check of the privileges, on tables
// that exist.
func floorGrants(ctx context.Context, db *sql.DB, table string) error {
	ftbl, htbl := ident.Quote(floor.Table(table)), ident.Quote(floor.History(table))
	if err := checkGrants(ctx, db, ftbl, "in which every term is assigned", []Privilege{
		{Name: "INSERT", Query: `INSERT INTO ` + ftbl + ` (anchor, term_floor) SELECT '', 0 FROM DUAL WHERE 1 = 0`},
		{Name: "UPDATE", Query: `UPDATE ` + ftbl + ` SET term_floor = term_floor WHERE 1 = 0`},
	}); err != nil {
		return err
	}
	return checkGrants(ctx, db, htbl, "to which every term is appended", []Privilege{
		{Name: "INSERT", Query: `INSERT INTO ` + htbl + ` (anchor, term, holder, began, started_at) SELECT '', 0, '', '', 0 FROM DUAL WHERE 1 = 0`},
		{Name: "UPDATE", Query: `UPDATE ` + htbl + ` SET ended = ended WHERE 1 = 0`},
	})
}

// Each judge below returns nil when the session's settings are safe, and
// else its refusal.

// judgeTimeZone fails when the session time zone has daylight saving time:
// NOW() would jump by an hour and leases with it. A zone without DST gives
// the same offset in January and July.
func judgeTimeZone(s session) error {
	if s.dst.Valid && s.dst.Int64 == 181*24*3600 {
		return nil
	}
	return fmt.Errorf("%w (session time_zone is %q)", ErrUnsafeTimeZone, s.timeZone)
}

// judgeCommits fails with ErrNoAutocommit when the session does not
// commit each statement (see election's commitsSQL): the statements on the
// pool that check it would all be refused.
func judgeCommits(s session) error {
	if s.autocommit == "1" && !strings.EqualFold(s.completion, "CHAIN") && s.completion != "1" {
		return nil
	}
	return fmt.Errorf("%w (session autocommit is %s, completion_type %s): remove them from the DSN, "+
		"and reset them before a connection goes back to the pool", ErrNoAutocommit, s.autocommit, s.completion)
}

// judgeAssignmentOrder fails with ErrSimultaneousAssignment when the
// session's sql_mode has MariaDB's SIMULTANEOUS_ASSIGNMENT: the heartbeat
// reads its decision after assigning it (see HeartbeatSQL), so under that
// mode it changes no existing row (it stays safe, but the candidate would
// never take over).
func judgeAssignmentOrder(s session) error {
	if !strings.Contains(strings.ToUpper(s.sqlMode), "SIMULTANEOUS_ASSIGNMENT") {
		return nil
	}
	return fmt.Errorf("%w (session sql_mode is %q)", ErrSimultaneousAssignment, s.sqlMode)
}

// judgeSysdate fails with ErrSysdateIsNow when SYSDATE() is not the server's
// clock at each call (--sysdate-is-now makes it NOW(), the statement's
// start, which a session can set): read after NOW(6) in the same
// statement, and after a 2 ms sleep when it first read the same, it still
// reads the same. Only equality tells: in a session time zone with
// daylight saving time, a fall-back between the calls (or a clock stepped
// back) makes the later read earlier, not equal. The heartbeat's own
// proof is the same comparison (dbclock.Trusted).
func judgeSysdate(s session) error {
	if s.start != s.sysdate {
		return nil
	}
	return fmt.Errorf("%w (SYSDATE(6) was %s at the statement's start and after a 2 ms sleep)", ErrSysdateIsNow, s.start)
}

// judgeSelectLimit fails with ErrSelectLimit when the session's
// sql_select_limit is below MinSelectLimit: a SELECT without a LIMIT of
// its own returns at most that many rows, and the election's reads of
// many rows (a batch's rows, a shard group's holders, the schema's
// columns) would miss the others, and 0 leaves every read empty.
func judgeSelectLimit(s session) error {
	if s.selectLimit >= MinSelectLimit {
		return nil
	}
	return fmt.Errorf("%w (session sql_select_limit is %d): remove it from the DSN, or set sql_select_limit=DEFAULT there, "+
		"and reset it before a connection goes back to the pool", ErrSelectLimit, s.selectLimit)
}

// MinSelectLimit is the least sql_select_limit the election takes: 2^31
// - 1, no limit for any read it makes. MySQL's and MariaDB's default is
// 2^64 - 1, go-mysql-server's 2^31 - 1.
const MinSelectLimit = math.MaxInt32

// CheckSysdate reads the session of one of db's connections and judges
// its server's clock (judgeSysdate).
func CheckSysdate(ctx context.Context, db *sql.DB) error {
	return Check{judge: judgeSysdate}.Run(ctx, db)
}

// CheckPrivileges checks that the session's user may run every statement a
// candidate sends to tbl (quoted): SELECT (every look), INSERT and UPDATE
// (the heartbeat's INSERT … ON DUPLICATE KEY UPDATE, takes, renewals,
// releases). It sends one statement per privilege that matches no row
// (Privileges): the server checks privileges before it looks for rows, so
// nothing is written and no row is locked. A user without them is refused
// here, at preflight, instead of campaigning as a follower that fails only
// when it tries to take over (a standby that cannot fail over, unseen until
// the failover it exists for). It returns an error wrapping ErrAccessDenied
// that names every missing privilege, or nil; other errors (a read-only
// server, which may become writable) are left to the campaign.
func CheckPrivileges(ctx context.Context, db *sql.DB, tbl string) error {
	// Not DELETE, the last of Privileges: operators' (Reelect), not
	// candidates'.
	return checkGrants(ctx, db, tbl, candidatesNeed, Privileges(tbl)[:3])
}

// candidatesNeed says why candidates need the privileges CheckPrivileges
// probes.
const candidatesNeed = "which a candidate needs to take over"

// checkGrants runs probes, statements on tbl (quoted) that match no row,
// and fails, wrapping ErrAccessDenied, naming every privilege the server
// denied and why the user needs it (need). A statement the server refuses
// otherwise is left to the campaign; an error of the connection or of ctx
// is returned.
func checkGrants(ctx context.Context, db *sql.DB, tbl, need string, probes []Privilege) error {
	var missing []string
	var first error
	for _, p := range probes {
		// Another refusal by the server is no privilege's: the campaign
		// will say.
		switch _, err := db.ExecContext(ctx, p.Query); {
		case errors.Is(Classify(err, ""), ErrAccessDenied):
			missing = append(missing, p.Name)
			first = cmp.Or(first, err)
		case err != nil && (ctx.Err() != nil || mysqlerr.Errno(err) == 0):
			return fmt.Errorf("election: checking privileges on %s: %w", tbl, err)
		}
	}
	if missing == nil {
		return nil
	}
	all := []string{"SELECT"}
	for _, p := range probes {
		all = append(all, p.Name)
	}
	return fmt.Errorf("%w: the user lacks %s on %s, %s (GRANT %s ON %s TO the user): %w",
		ErrAccessDenied, strings.Join(missing, ", "), tbl, need, strings.Join(all, ", "), tbl, first)
}

// Privileges are the probes of SELECT, INSERT, UPDATE and DELETE on tbl
// (quoted), for CheckPrivileges and the doctor: each matches no row (WHERE
// 1 = 0), and the server checks privileges before it looks for rows.
func Privileges(tbl string) []Privilege {
	return []Privilege{
		{Name: "SELECT", Query: `SELECT ` + RecordColumns + ` FROM ` + tbl + ` WHERE 1 = 0`},
		{Name: "INSERT", Query: `INSERT INTO ` + tbl + ` (anchor, service_id) SELECT '', '' FROM DUAL WHERE 1 = 0`},
		{Name: "UPDATE", Query: `UPDATE ` + tbl + ` SET service_id = service_id WHERE 1 = 0`},
		{Name: "DELETE", Query: `DELETE FROM ` + tbl + ` WHERE 1 = 0`},
	}
}

// checkTopology refuses servers where GET_LOCK is not cluster-wide, as the lock
// backend's preflight does: a Galera node (MariaDB Galera Cluster, Percona
// XtraDB Cluster), or MySQL Group Replication in multi-primary mode. A
// variable the server does not have reads as "" (and not ok): it is not
// that kind of server.
func checkTopology(ctx context.Context, db *sql.DB) error {
	refuse := func(why string) error {
		return fmt.Errorf("%w: %s: GET_LOCK is local to each node, so candidates connected to different nodes could all hold the lock; use the table backend (election.NewTable)",
			ErrUnsupportedTopology, why)
	}
	multiPrimary := false
	for _, name := range []string{"wsrep_on", "wsrep_provider", "group_replication_single_primary_mode"} {
		v, ok, err := stmt.ServerVariable(ctx, db, "global."+name)
		switch {
		case err != nil:
			return fmt.Errorf("election: checking the topology: %w", err)
		case name == "wsrep_on" && stmt.IsOn(v):
			return refuse("the server is a Galera cluster node (wsrep_on=ON)")
		case name == "wsrep_provider" && v != "" && !strings.EqualFold(v, "none"):
			return refuse(fmt.Sprintf("the server has a Galera provider loaded (wsrep_provider=%s)", v))
		case name == "group_replication_single_primary_mode":
			multiPrimary = ok && !stmt.IsOn(v)
		}
	}
	if !multiPrimary {
		return nil
	}
	// With any member online, a multi-primary group refuses the lock
	// backend.
	var online int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM performance_schema.replication_group_members WHERE MEMBER_STATE = 'ONLINE'`).Scan(&online)
	switch {
	case mysqlerr.Errno(err) != 0: // the server refused the statement
		return refuse(fmt.Sprintf("Group Replication is configured for multi-primary mode and its members cannot be read (%v)", err))
	case err != nil:
		return fmt.Errorf("election: checking the topology (Group Replication members): %w", err)
	case online > 0:
		return refuse("the server runs Group Replication in multi-primary mode")
	}
	return nil
}
