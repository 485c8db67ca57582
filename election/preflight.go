package election

// This file is Run's preflight on the server, the session and the schema,
// and Probe, which hands the same checks to package doctor (`sqlelect
// doctor`), so that the doctor fails every server and session Run refuses.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// ErrUnsafeServer means the server answered a statement the way no MySQL or
// MariaDB does, in a way the election's safety rests on (the heartbeat's
// affected rows): a lease protocol on it could elect two leaders. Run's
// preflight checks this; `sqlelect doctor` (doctor.Check) checks more.
var ErrUnsafeServer = errors.New("election: the server breaks a promise the election relies on (run `sqlelect doctor`)")

// The backends, as Run's preflight checks and the doctor name them.
const (
	backendTable = probe.Table // NewTable
	backendLock  = probe.Lock  // NewLock
)

// Probe returns, for package doctor, what the doctor needs of config (its
// settings with defaults; its Name is ignored) and Run's preflight checks,
// which the doctor reports on. Its errors wrap ErrInvalidConfig. The
// result's type is internal: only the doctor uses it.
func Probe(config Config) (probe.Kit, error) {
	config.Name = probe.ScratchPrefix + "x"
	cfg, err := config.settings()
	if err != nil {
		return probe.Kit{}, err
	}
	table := cfg.Table
	return probe.Kit{
		Table: table, Quoted: quoteTable(table), LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline,
		RenewInterval: cfg.RenewInterval, QueryTimeout: cfg.QueryTimeout, Now: cfg.Clock.Now,
		Checks: preflightChecks(table),
		Heartbeat: func(ctx context.Context, ex probe.Execer, name string) (probe.Heartbeat, error) {
			return probeHeartbeat(ctx, ex, quoteTable(table), name)
		},
		Layout: func(ctx context.Context, db *sql.DB, err error) error {
			return explainLayout(ctx, db, table, classify(err, table))
		},
		PrivilegeProbes: privilegeProbes(quoteTable(table)),
		Privileges:      func(ctx context.Context, db *sql.DB) error { return checkPrivileges(ctx, db, quoteTable(table)) },
		Topology:        checkLockTopology,
		Permanent:       permanent,
		TermNow:         termNowSQL,
	}, nil
}

// preflightChecks are the checks of Run's preflight on the session and the
// schema of table that retrying cannot fix.
func preflightChecks(table string) []probe.Check {
	bothBackends, tableOnly := []string{backendTable, backendLock}, []string{backendTable}
	return []probe.Check{
		{Prop: probe.FloorTable, Backends: bothBackends, Run: func(ctx context.Context, db *sql.DB) error {
			return checkFloorTable(ctx, db, table, newFloorStmts(table, stmt.Bound{}, 0))
		}, Pass: "the term floor table exists, and the user may read and write it",
			Consequence: "every term is assigned in a transaction with the floor table: Run refuses to campaign without it",
			Fix:         "run `sqlelect migrate up` (or schema.DDL), and GRANT SELECT, INSERT, UPDATE on it"},
		{Prop: probe.TimeZone, Backends: bothBackends, Run: checkTimeZone,
			Pass:        "the session time zone has no daylight saving time",
			Consequence: "local times jump by an hour twice a year and leases with them: Run refuses it (ErrUnsafeTimeZone)",
			Fix:         "set time_zone='+00:00' in the DSN (time_zone=%27%2B00%3A00%27; the CLI does unless the DSN sets one)"},
		{Prop: probe.Autocommit, Backends: bothBackends, Run: checkCommits,
			Pass:        "the session commits each statement (autocommit=1, completion_type NO_CHAIN)",
			Consequence: "a renewal left uncommitted lets the leader believe while every other session sees its lease run out: Run refuses it (ErrNoAutocommit)",
			Fix:         "remove autocommit and completion_type from the DSN (and reset them before a connection goes back to the pool)"},
		{Prop: probe.AssignmentOrder, Backends: tableOnly, Run: checkAssignmentOrder,
			Pass:        "the session assigns a SET list left to right",
			Consequence: "the heartbeat decides in its first assignment and reads the decision in the others: it would never take a row, and Run refuses it (ErrSimultaneousAssignment)",
			Fix:         "remove SIMULTANEOUS_ASSIGNMENT from the DSN's sql_mode (or the server's default)"},
		{Prop: probe.Sysdate, Backends: bothBackends, Run: checkSysdate,
			Pass:        "SYSDATE(6) is the server's clock at each call",
			Consequence: "SYSDATE() is NOW(), which a session's SET @@timestamp moves: Run refuses it (ErrSysdateIsNow)",
			Fix:         "restart the server without --sysdate-is-now"},
	}
}

// runPreflight runs the preflightChecks of backend, and returns the first
// error.
func runPreflight(ctx context.Context, db *sql.DB, table, backend string) error {
	for _, c := range preflightChecks(table) {
		if !slices.Contains(c.Backends, backend) {
			continue
		}
		if err := c.Run(ctx, db); err != nil {
			return err
		}
	}
	return nil
}

// probeHeartbeat runs the table backend's own heartbeat statement on
// election name of tbl (quoted) through ex, in five steps, and returns the
// affected rows of each: candidate A inserts the row (1), renews it (2), B
// looks at A's live row (0, or 1 under CLIENT_FOUND_ROWS), A lets it
// expire at once (1: an UPDATE), and B takes the expired row (2) with a
// higher term; the renewal must keep A's term. Last, it writes a decision
// outside the heartbeat, which the table must refuse (probe.Heartbeat.Guarded).
// Run's preflight runs it in a transaction it rolls back; the doctor on the
// pool, and deletes the row.
func probeHeartbeat(ctx context.Context, ex probe.Execer, tbl, name string) (probe.Heartbeat, error) {
	var p probe.Heartbeat
	hb := stmt.Must(heartbeatSQL(tbl))
	// Expired a day ago, so that the takeover sees it expired whatever the
	// session's clock (one behind, which the heartbeat tolerates, judges
	// expiry later).
	expire := stmt.Must(`UPDATE ` + tbl + ` SET last_seen_active = last_seen_active - INTERVAL 1 DAY, lease_ms = 0, transfer_to = NULL
WHERE anchor = :name AND ` + holdsCond)
	a := stmt.Params{Name: name, Me: probe.A, Lease: 60000}
	b := stmt.Params{Name: name, Me: probe.B, Lease: 60000}
	for i, step := range []struct {
		what   string
		s      stmt.Stmt
		params *stmt.Params
		term   *uint64 // where the step's LAST_INSERT_ID goes, if anywhere
	}{
		{"insert", hb, &a, &p.Term},
		{"renew", hb, &a, &p.Renewed},
		{"another candidate's look at the live row", hb, &b, nil},
		{"expire", expire, &a, nil},
		{"take over the expired row", hb, &b, &p.Took},
	} {
		a.Hold = p.Term // A holds the term it inserted
		query, args := step.s.Bind(*step.params)
		res, err := ex.ExecContext(ctx, query, args...)
		if err != nil {
			return p, fmt.Errorf("election: the heartbeat probe's step %d (%s): %w", i+1, step.what, err)
		}
		if p.Counts[i], err = res.RowsAffected(); err != nil {
			return p, err
		}
		if step.term != nil {
			id, _ := res.LastInsertId()
			*step.term = uint64(id)
		}
	}
	var err error
	p.Guarded, err = probeDecisionGuard(ctx, ex, tbl, name)
	return p, err
}

// probeDecisionGuard writes a decision outside the heartbeat to election
// name of tbl, which the table must refuse (its CHECK constraint), and
// reports whether it did.
func probeDecisionGuard(ctx context.Context, ex probe.Execer, tbl, name string) (bool, error) {
	q, args := stmt.Must(`UPDATE ` + tbl + ` SET decision = 'renewed' WHERE anchor = :name`).Bind(stmt.Params{Name: name})
	switch _, err := ex.ExecContext(ctx, q, args...); {
	case err == nil:
		if _, err := ex.ExecContext(ctx, `UPDATE `+tbl+` SET decision = NULL WHERE anchor = ?`, name); err != nil {
			return false, fmt.Errorf("election: the heartbeat probe's clean-up of the decision column: %w", err)
		}
		return false, nil
	case probe.IsCheckViolation(err):
		return true, nil
	default:
		return false, fmt.Errorf("election: the heartbeat probe's step 6 (a decision written outside the heartbeat): %w", err)
	}
}

// Server errors that no MySQL or MariaDB returns for the heartbeat.
const (
	erParse        = 1064 // ER_PARSE_ERROR
	erUnknownError = 1105 // ER_UNKNOWN_ERROR: what other servers answer for what they do not support
)

// preflightServer is the cheap subset of the doctor that Run's preflight
// sends (both backends): the heartbeat probe (probeHeartbeat), in a
// transaction it rolls back, so that nothing is written, no DELETE
// privilege is needed and no row is left. A server that answers with the
// wrong affected rows fails with ErrUnsafeServer (permanent: Run stops).
// Errors are left to the campaign (a read-only server may become writable;
// a missing privilege is classified and stops Run as the heartbeat would),
// but for a statement the server refuses as no MySQL or MariaDB does (1064,
// 1105: no candidate could take over), ErrUnsafeServer too. probed reports
// whether the probe ran and passed: candidates that share a Batcher stop
// probing once one did; others probe at each Run.
func preflightServer(ctx context.Context, db *sql.DB, table string) (probed bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, nil // the campaign will say
	}
	defer func() { _ = tx.Rollback() }()
	var b [4]byte
	_, _ = rand.Read(b[:])
	p, err := probeHeartbeat(ctx, tx, quoteTable(table), probe.ScratchPrefix+hex.EncodeToString(b[:]))
	switch n := mysqlerr.Errno(err); {
	case err == nil:
	case serverCause(err) == ErrAccessDenied:
		return false, classify(err, table)
	case n == erParse || n == erUnknownError:
		// Not MySQL's or MariaDB's answer to the statement candidates
		// send (go-mysql-server refuses a takeover with 1105): no
		// candidate could ever take over.
		return false, fmt.Errorf("%w: the server refuses the heartbeat statement: %w", ErrUnsafeServer, err)
	default:
		return false, nil // a read-only server, a conflict, a timeout: the campaign will say
	}
	if ok, _ := p.OK(); !ok {
		return false, fmt.Errorf("%w: the heartbeat's affected rows were %s where MySQL and MariaDB report 1, 2, 0 (or 1), 1, 2 "+
			"(terms %d then %d): this server would let two candidates lead at once, or none", ErrUnsafeServer, p, p.Term, p.Took)
	}
	if why := p.Problem(); why != "" {
		return false, fmt.Errorf("%w: %s: two candidates could lead at once", ErrUnsafeServer, why)
	}
	return true, nil
}
