// Package doctor tells whether the server behind a *sql.DB keeps the
// promises package election's backends rely on (`sqlelect doctor`): Check
// reports on each property, pass, warn or fail, with the consequence and
// the fix, and Report.Safe tells whether a backend is safe there. Run's
// preflight (package election) makes the cheapest of these checks at each
// start; the doctor makes the same ones, through the same code, and more.
package doctor

// This file is Check, CheckPrivileges and the probes.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// CheckStatus is Check's verdict on one property.
type CheckStatus string

// The verdicts.
const (
	CheckPass CheckStatus = "pass" // the server keeps the promise
	CheckWarn CheckStatus = "warn" // works, at a cost (liveness, an operator's tool, a Batcher) or with a caveat
	CheckFail CheckStatus = "fail" // the backends in Finding.Backends are unsafe, or the property could not be verified
)

// Backend names, as Report.Safe and Finding.Backends spell them (and
// package probe, for Run's preflight checks).
const (
	BackendTable = "table" // election.NewTable
	BackendLock  = "lock"  // election.NewLock
)

// The properties Check reports on, in the order of its report. Those of
// Run's preflight checks (floor_table to topology) are spelt as package
// probe spells them.
const (
	PropPrivileges      = "privileges"       // SELECT, INSERT, UPDATE (and DELETE) on the table
	PropReadOnly        = "read_only"        // read_only, super_read_only, or a replica
	PropBinlogFormat    = "binlog_format"    // a binary log a replica replays as rows (not STATEMENT)
	PropFloorTable      = "floor_table"      // the term floor table exists, and the user may write it
	PropTimeZone        = "time_zone"        // the session time zone has no DST
	PropAutocommit      = "autocommit"       // the session commits each statement (autocommit, no completion_type=CHAIN)
	PropAssignmentOrder = "assignment_order" // the session assigns a SET list left to right (no SIMULTANEOUS_ASSIGNMENT)
	PropSysdate         = "sysdate"          // SYSDATE() is the server's clock at each call (no --sysdate-is-now)
	PropSelectLimit     = "select_limit"     // the session returns every row a SELECT finds (sql_select_limit of 2^31 - 1 or more; the default is 2^64 - 1)
	PropTopology        = "topology"         // Galera or Group Replication: which backends are safe
	PropAffectedRows    = "affected_rows"    // the heartbeat's affected rows are 1, 2 and 0 (1 under CLIENT_FOUND_ROWS)
	PropReplace         = "replace"          // REPLACE over a row reports 2
	PropNowMicroseconds = "now_microseconds" // NOW(6) has microseconds
	PropNowMonotonic    = "now_monotonic"    // one connection's NOW(6) never goes back
	PropNowOneClock     = "now_one_clock"    // two connections' NOW(6) agree
	PropGetLock         = "get_lock"         // GET_LOCK with zero and fractional timeouts
	PropIsUsedLock      = "is_used_lock"     // IS_USED_LOCK returns the holder's CONNECTION_ID()
	PropLockSessionEnd  = "lock_session_end" // a lock is released when its session ends
	PropSkipLocked      = "skip_locked"      // SKIP LOCKED leaves the lock it skips to its holder (the Batcher)
	PropStatementBounds = "statement_bounds" // lock waits end with the statement's bound
	PropWaitTimeout     = "wait_timeout"     // idle sessions outlive the lease; the lock session can set it
	PropRoundTrip       = "round_trip"       // the round trip against the renew deadline
	PropCleanup         = "cleanup"          // the scratch rows were deleted
)

// Finding is Check's verdict on one property of the server.
type Finding struct {
	// Property is one of the Prop* constants.
	Property string `json:"property"`
	// Status is the verdict: a fail makes the backends in Backends unsafe
	// and is only a warning for the others (see StatusFor).
	Status CheckStatus `json:"status"`
	// Backends are the backends whose safety rests on the property.
	Backends []string `json:"backends"`
	// Detail says what the server did.
	Detail string `json:"detail"`
	// Consequence says what goes wrong on this server because of it (empty
	// on a pass).
	Consequence string `json:"consequence,omitempty"`
	// Fix says what to do about it (empty on a pass).
	Fix string `json:"fix,omitempty"`
}

// StatusFor is the finding's verdict for backend: a fail on a property the
// backend's safety does not rest on is a warning.
func (f Finding) StatusFor(backend string) CheckStatus {
	if f.Status == CheckFail && !slices.Contains(f.Backends, backend) {
		return CheckWarn
	}
	return f.Status
}

// Report is what Check found, one Finding per property.
type Report struct {
	// Server is the server's VERSION().
	Server string `json:"server"`
	// Findings are in the order of the Prop* constants.
	Findings []Finding `json:"findings"`
}

// Safe reports whether backend (BackendTable or BackendLock) is safe on
// the server: no finding fails for it.
func (r Report) Safe(backend string) bool { return len(r.Failed(backend)) == 0 }

// Failed returns the properties that fail for backend.
func (r Report) Failed(backend string) []string {
	var out []string
	for _, f := range r.Findings {
		if f.StatusFor(backend) == CheckFail {
			out = append(out, f.Property)
		}
	}
	return out
}

// For returns the findings with their verdicts for backend (StatusFor).
func (r Report) For(backend string) []Finding {
	out := make([]Finding, len(r.Findings))
	for i, f := range r.Findings {
		f.Status = f.StatusFor(backend)
		out[i] = f
	}
	return out
}

// Find returns the finding on property, and false when there is none.
func (r Report) Find(property string) (Finding, bool) {
	for _, f := range r.Findings {
		if f.Property == property {
			return f, true
		}
	}
	return Finding{}, false
}

// Check tells whether the server behind db keeps the promises the backends
// rely on: one Finding per property (see the Prop* constants), each pass,
// warn or fail with the consequence and the fix. Report.Safe tells whether
// a backend is safe there.
//
// config is the configuration of the candidates that will run (the lease, the
// renew deadline and interval, the query timeout and the table count; its
// Name is ignored); zero fields get their defaults, and errors wrap
// election.ErrInvalidConfig. Check works in a scratch election of config.Table named
// "sqlelect-doctor-" and random hex digits (and the same followed by "/2"),
// whose rows it deletes before it returns, even after a failure; its user
// locks are released with its connections. Every statement is bounded by
// config.Tuning.QueryTimeout (a few wait on purpose: about four seconds in
// all). It holds at most three connections of db at once (two of its own, and one
// from the pool): with SetMaxOpenConns(n) leave it that many.
//
// The error is for what stops the check itself: a nil db
// (election.ErrNilDB), an invalid config, a server that does not answer, a
// missing table or an outdated schema (election.ErrTableMissing,
// election.ErrSchemaMismatch), ctx ending.
func Check(ctx context.Context, db *sql.DB, config election.Config) (Report, error) {
	if db == nil {
		return Report{}, election.ErrNilDB
	}
	config.Name = probe.ScratchPrefix + "x" // ignored: the checks work in scratch elections
	cfg, err := config.WithDefaults()
	if err != nil {
		return Report{}, err
	}
	name := fmt.Sprintf("%s%08x", probe.ScratchPrefix, rand.Uint32())
	ch := &checker{ctx: ctx, db: sqlx.NewDb(db, "mysql"), cfg: cfg, tbl: ident.Quote(cfg.Table), name: name, name2: name + "/2"}
	qctx, cancel := ch.step(0)
	defer cancel()
	ch.site, err = getlock.ReadSite(qctx, db, cfg.Table)
	if err == nil {
		ch.report.Server, err = ch.site.Version, ch.privileges()
	}
	if err != nil {
		return Report{}, err
	}
	for _, run := range []func(){
		ch.readOnly, ch.binlogFormat, ch.preflight, ch.writes(PropAffectedRows, tableOnly(), ch.affectedRows),
		ch.writes(PropReplace, none(), ch.replace), ch.clock, ch.locks, ch.writes(PropSkipLocked, none(), ch.skipLocked),
		ch.writes(PropStatementBounds, none(), ch.statementBounds), ch.waitTimeout, ch.roundTrip,
	} {
		if ctx.Err() != nil {
			break
		}
		run()
	}
	ch.cleanup()
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	return ch.report, nil
}

// CheckPrivileges checks that the user of db may campaign in table (empty
// for election.DefaultTable): SELECT, INSERT and UPDATE, each with a
// statement that matches no row, so that nothing is written or locked.
// ctx bounds its statements. The error wraps election.ErrAccessDenied and
// names every missing privilege. Run checks the same at preflight and stops
// with the error; the CLI's status warns with it.
func CheckPrivileges(ctx context.Context, db *sql.DB, table string) error {
	// WithDefaults defaults the table and validates it (ident.Table) as Run
	// does; the name is ignored.
	cfg, err := election.Config{Name: probe.ScratchPrefix + "x", Table: table}.WithDefaults()
	if err != nil {
		return err
	}
	return probe.CheckPrivileges(ctx, db, ident.Quote(cfg.Table))
}

// checker runs Check's probes; each adds its findings to report. The
// statements it shares with Run (the privilege probes, the preflight
// checks, the heartbeat probe) are Run's own, in internal/probe; the
// others are its own.
type checker struct {
	ctx          context.Context
	db           *sqlx.DB        // Check's db, as sqlx for the connections and rows scanned whole
	cfg          election.Config // with its defaults
	tbl          string          // cfg.Table, quoted
	name, name2  string          // the scratch elections
	site         getlock.Site
	noWrites     bool // the user cannot write the table: the write probes are skipped
	simultaneous bool // the session assigns simultaneously (assignment_order failed)
	report       Report
}

// The backends a finding concerns.
func both() []string      { return []string{BackendTable, BackendLock} }
func tableOnly() []string { return []string{BackendTable} }
func lockOnly() []string  { return []string{BackendLock} }
func none() []string      { return []string{} } // a Batcher's, or an operator's tool's: never a fail for a backend

// verdict is one outcome of a probe: when cond holds, a finding of status
// st (never a pass), with its detail, consequence and fix.
type verdict struct {
	cond                     bool
	st                       CheckStatus
	detail, consequence, fix string
}

// judge adds on property for backends the finding of the first verdict
// whose cond holds, and a pass with detail (no consequence, no fix) when
// none does.
func (ch *checker) judge(property string, backends []string, detail string, vs ...verdict) {
	v := verdict{st: CheckPass, detail: detail}
	if i := slices.IndexFunc(vs, func(v verdict) bool { return v.cond }); i >= 0 {
		v = vs[i]
	}
	ch.report.Findings = append(ch.report.Findings, Finding{Property: property, Status: v.st,
		Backends: slices.Clone(backends), Detail: v.detail, Consequence: v.consequence, Fix: v.fix})
}

// failed is the verdict of a probe whose statement what failed with err: a
// fail, the property unverified. judge(…, "", failed(what, err)), with err
// not nil, adds that fail alone.
func failed(what string, err error) verdict {
	return verdict{err != nil, CheckFail, fmt.Sprintf("could not check (%s): %v", what, err),
		"unverified: the backend's safety cannot be vouched for on this server",
		"see the error; run the check again with a user and server that answer it"}
}

// writes is run, a probe of property for backends that writes the table,
// or a warning instead when the user cannot write the table (the
// privileges or read_only finding fails already).
func (ch *checker) writes(property string, backends []string, run func()) func() {
	return func() {
		if !ch.noWrites {
			run()
			return
		}
		ch.judge(property, backends, "", verdict{true, CheckWarn, "not checked: the user cannot write the table (see privileges and read_only)",
			"unverified", "run the check with a user that can write the table, on a writable server"})
	}
}

// step is a context for one statement of ch: QueryTimeout, plus extra for
// a statement that waits on purpose.
func (ch *checker) step(extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ch.ctx, ch.cfg.Tuning.QueryTimeout+extra)
}

func (ch *checker) exec(query string, args ...any) (sql.Result, error) {
	ctx, cancel := ch.step(0)
	defer cancel()
	return ch.db.ExecContext(ctx, query, args...)
}

// scanRow runs query on q (the pool, a connection or a transaction) in a
// step with extra time, scans its row into dest, and returns how long it
// took.
func (ch *checker) scanRow(extra time.Duration, q stmt.RowQuerier, dest any, query string, args ...any) (time.Duration, error) {
	ctx, cancel := ch.step(extra)
	defer cancel()
	start := ch.cfg.Tuning.Clock.Now()
	err := q.QueryRowContext(ctx, query, args...).Scan(dest)
	return ch.cfg.Tuning.Clock.Now().Sub(start), err
}

// withConns runs run on n connections of their own from the pool, and then
// discards them without giving them back to the pool (their sessions hold
// locks, transactions or changed variables: the server ends them). run
// must end the transactions it begins on them. When a connection cannot be
// had, it adds an unverified finding on property for backends instead.
func (ch *checker) withConns(property string, backends []string, n int, run func(cs []*sqlx.Conn)) {
	var cs []*sqlx.Conn
	for range n {
		ctx, cancel := ch.step(0)
		c, err := ch.db.Connx(ctx)
		cancel()
		if err != nil {
			ch.judge(property, backends, "", failed("a connection", err))
			return
		}
		defer (&getlock.Conn{Conn: c.Conn}).Discard() // when withConns returns
		cs = append(cs, c)
	}
	run(cs)
}

// variable reads a global or session variable (scope.name); ok is false
// when the server has no such variable.
func (ch *checker) variable(name string) (val string, ok bool, err error) {
	ctx, cancel := ch.step(0)
	defer cancel()
	return stmt.ServerVariable(ctx, ch.db, name)
}

// privileges runs Run's privilege probes (probe.Privileges:
// nothing is written or locked) and also tells a read-only server apart. A
// missing table or column is Check's error.
func (ch *checker) privileges() error {
	var denied, refused []string // the privileges the user lacks; the probes a read-only server refused
	var firstErr error           // of the first denied probe but DELETE's
	for _, p := range probe.Privileges(ch.tbl) {
		_, err := ch.exec(p.Query)
		switch {
		case err == nil:
		case errors.Is(election.Classify(err), election.ErrAccessDenied):
			denied = append(denied, p.Name)
			if p.Name != "DELETE" {
				firstErr = cmp.Or(firstErr, err)
			}
		case p.Name == "SELECT":
			ctx, cancel := ch.step(0)
			defer cancel()
			return probe.Layout(ctx, ch.db.DB, ch.cfg.Table, err)
		case mysqlerr.Errno(err) == 1290: // ER_OPTION_PREVENTS_STATEMENT: --read-only, super_read_only
			refused = append(refused, p.Name)
		default:
			ch.noWrites = true
			ch.judge(PropPrivileges, both(), "", failed(p.Name, err))
			return nil
		}
	}
	grant := "GRANT SELECT, INSERT, UPDATE, DELETE ON " + ch.tbl + " TO the user"
	ch.noWrites = firstErr != nil || refused != nil
	ch.judge(PropPrivileges, both(), "SELECT, INSERT, UPDATE and DELETE on "+ch.tbl,
		verdict{firstErr != nil, CheckFail, fmt.Sprintf("the user lacks %s on %s: %v", strings.Join(denied, ", "), ch.tbl, firstErr),
			"a candidate without them cannot take over: a standby that fails only at the failover it exists for", grant},
		verdict{refused != nil, CheckWarn,
			"SELECT on " + ch.tbl + "; " + strings.Join(refused, ", ") + " not checked: the server refuses writes (see read_only)", "unverified", grant},
		verdict{denied != nil, CheckWarn, "the user has SELECT, INSERT and UPDATE on " + ch.tbl + " but not DELETE", // DELETE only
			"Reelect (sqlelect reelect) and this check's cleanup of its scratch rows fail", grant})
	return nil
}

// readOnly: a read-only server, or a replica, takes no heartbeat (or, with
// a privileged user, takes heartbeats that its primary never sees).
func (ch *checker) readOnly() {
	var why []string
	for _, v := range []string{"read_only", "super_read_only"} {
		val, ok, err := ch.variable("global." + v)
		if err != nil {
			ch.judge(PropReadOnly, both(), "", failed("read_only", err))
			return
		}
		if ok && stmt.IsOn(val) {
			why = append(why, v+"=ON")
		}
	}
	channels, err := ch.replicaChannels()
	note := ""
	switch {
	case errors.Is(election.Classify(err), election.ErrAccessDenied):
		note = "; whether it replicates from another server could not be read (SHOW REPLICA STATUS needs REPLICATION CLIENT, or SLAVE MONITOR on MariaDB)"
	case err != nil:
		note = fmt.Sprintf("; whether it replicates could not be read (%v)", err)
	case len(channels) > 0:
		why = append(why, "it replicates from another server (channels: "+strings.Join(channels, ", ")+")")
	}
	ch.noWrites = ch.noWrites || why != nil
	ch.judge(PropReadOnly, both(), "read_only=OFF, super_read_only=OFF",
		verdict{why != nil, CheckFail, "the server is read-only or a replica: " + strings.Join(why, ", ") + note,
			"candidates cannot write the row (no leader), or, with a privileged user, elect a leader of their own that the primary's candidates never see",
			"point the DSN at the primary (the writable server of the topology), never at a replica"},
		verdict{note != "", CheckWarn, "read_only=OFF, super_read_only=OFF" + note,
			"a replica would go unnoticed", "grant REPLICATION CLIENT (MySQL) or SLAVE MONITOR (MariaDB) to see it, or make sure the DSN names the primary"})
}

// binlogFormat: a server that writes a STATEMENT binary log has its
// replicas evaluate each statement again, by their own clock (SYSDATE(6)):
// a replica's heartbeat may decide otherwise than the primary's (see
// docs/guarantees.md, "What is not guaranteed"). MIXED logs the statements as rows
// (SYSDATE() is unsafe for statement logging), as ROW does.
func (ch *checker) binlogFormat() {
	logBin, _, err := ch.variable("global.log_bin")
	var format string
	if err == nil {
		format, _, err = ch.variable("global.binlog_format")
	}
	ch.judge(PropBinlogFormat, both(), fmt.Sprintf("log_bin=%s, binlog_format=%s: replicas apply the rows the primary wrote", logBin, format),
		verdict{err != nil, CheckWarn, fmt.Sprintf("could not check (the binary log's format): %v", err), "unverified",
			"make sure a replica that may be promoted replicates rows (binlog_format ROW or MIXED)"},
		verdict{stmt.IsOn(logBin) && strings.EqualFold(format, "STATEMENT"), CheckFail, "the server writes its binary log as statements (binlog_format=STATEMENT)",
			"a replica evaluates each heartbeat by its own clock, and its row can read as expired while the primary's is live: after a failover to it, a follower takes over while the old leader still believes",
			"SET GLOBAL binlog_format = 'ROW' (or MIXED), and in the server's configuration"})
}

// replicaChannels returns the server's replication channels other than
// Group Replication's own.
func (ch *checker) replicaChannels() ([]string, error) {
	ctx, cancel := ch.step(0)
	defer cancel()
	rows, err := ch.db.QueryxContext(ctx, `SHOW REPLICA STATUS`)
	if mysqlerr.Errno(err) == 1064 { // ER_PARSE_ERROR: before MySQL 8.0.22 and MariaDB 10.5.1
		rows, err = ch.db.QueryxContext(ctx, `SHOW SLAVE STATUS`)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		row, col := map[string]any{}, map[string]string{}
		if err := rows.MapScan(row); err != nil {
			return nil, err
		}
		for k, v := range row {
			b, _ := v.([]byte)
			col[strings.ToLower(k)] = string(b)
		}
		name := cmp.Or(col["channel_name"], col["connection_name"])
		if !strings.HasPrefix(name, "group_replication") {
			out = append(out, cmp.Or(name, "default")+" from "+cmp.Or(col["source_host"], col["master_host"]))
		}
	}
	return out, rows.Err()
}

// preflight reports on Run's preflight checks: a fail where Run would
// refuse (a permanent error), unverified where the check could not be made.
func (ch *checker) preflight() {
	for _, c := range probe.Checks(ch.cfg.Table) {
		ctx, cancel := ch.step(0)
		err := c.Run(ctx, ch.db.DB)
		cancel()
		ch.simultaneous = ch.simultaneous || c.Prop == PropAssignmentOrder && probe.Permanent(err)
		ch.judge(c.Prop, c.Backends, c.Pass, verdict{probe.Permanent(err), CheckFail, fmt.Sprint(err), c.Consequence, c.Fix}, failed(c.Prop, err))
	}
}

// affectedRows runs the heartbeat probe on the pool (autocommit, as candidates
// do).
func (ch *checker) affectedRows() {
	ctx, cancel := ch.step(0)
	defer cancel()
	foundRows, err := probe.RunHeartbeat(ctx, ch.db, ch.tbl, ch.name)
	passed := "1 (insert), 2 (renew), 0 (another's live row), 1, 2 (take over an expired row, with a higher term)"
	if foundRows {
		passed = "1, 2, 1, 1, 2: CLIENT_FOUND_ROWS (clientFoundRows=true, or a proxy's default): an unchanged row counts 1, which the heartbeat confirms by reading the row"
	}
	// The heartbeat refuses, by design, a session that assigns
	// simultaneously (its CHECK constraint) or whose time zone has daylight
	// saving time (its NULL anchor). ErrUnsafeServer: the affected rows, or
	// the decision column.
	ch.judge(PropAffectedRows, tableOnly(), passed,
		verdict{ch.simultaneous && probe.IsCheckViolation(err) || mysqlerr.Errno(err) == mysqlerr.BadNull, CheckWarn,
			"not checked: the heartbeat refuses this session by design (see assignment_order and time_zone): " + fmt.Sprint(err), "unverified", ""},
		verdict{errors.Is(err, election.ErrUnsafeServer), CheckFail, strings.TrimPrefix(fmt.Sprint(err), election.ErrUnsafeServer.Error()+": "),
			"the table backend decides who leads by these counts and its decision column: a candidate may believe it leads while another does, or nobody takes over an expired lease",
			"run the table backend on MySQL or MariaDB only, with the decision column and its CHECK constraint as migrations/000007_decision.up.sql creates them, enforced"},
		failed("the heartbeat", err))
}

// replace: an operator's REPLACE over a row reports 2 (a delete and an
// insert) and resets the columns it does not name.
func (ch *checker) replace() {
	res, err := ch.exec(`REPLACE INTO `+ch.tbl+` (anchor, service_id, last_seen_active) VALUES (?, ?, NOW(6))`, ch.name, probe.B)
	if err != nil {
		ch.judge(PropReplace, none(), "", failed("REPLACE", err))
		return
	}
	n, _ := res.RowsAffected()
	var acquired string
	_, err = ch.scanRow(0, ch.db, &acquired, `SELECT acquired FROM `+ch.tbl+` WHERE anchor = ?`, ch.name)
	ch.judge(PropReplace, none(), "REPLACE over a row reports 2 and resets the columns it does not name",
		verdict{n != 2 || err != nil || acquired != "operator", CheckWarn,
			fmt.Sprintf("REPLACE over a row reported %d affected rows (MySQL and MariaDB: 2), and left acquired = %q (want the default 'operator'; %v)", n, acquired, err),
			"the plain-SQL force-assume (REPLACE INTO service_election …) may not behave as documented",
			"steer elections with sqlelect assume / Operator.Assume (package operator) instead of plain REPLACE"})
}

// clockReads is how many times clock reads the second connection's clock
// between two of the first's.
const clockReads = 20

// clock: NOW(6) has microseconds, never goes back on one connection, and
// is the same clock for two connections. It reads NOW(6) on two
// connections of its own, 2*clockReads readings of the first (vals) and one
// of the second between each two, and takes the largest distance of the
// second's reading outside the first's two around it (offset, in µs).
func (ch *checker) clock() {
	ch.withConns(PropNowMicroseconds, both(), 2, func(c []*sqlx.Conn) {
		var vals []int64
		var offset int64
		for range clockReads {
			var r [3]int64
			for k, conn := range []*sqlx.Conn{c[0], c[1], c[0]} {
				if _, err := ch.scanRow(0, conn, &r[k], `SELECT `+dbclock.TermNow); err != nil {
					ch.judge(PropNowMicroseconds, both(), "", failed("NOW(6)", err))
					return
				}
			}
			vals = append(vals, r[0], r[2])
			offset = max(offset, r[0]-r[1], r[1]-r[2])
		}
		// NOW(6) has microseconds, and one connection's readings never
		// go back (back: the largest step back between two of them).
		var micro, milli bool
		var back int64
		for i, v := range vals {
			micro = micro || v%1000 != 0
			milli = milli || v%1000000 != 0
			back = max(back, vals[max(i-1, 0)]-v) // 0 for the first reading
		}
		ch.judge(PropNowMicroseconds, both(), "the server clock (SYSDATE(6), which terms use) has microseconds",
			verdict{!milli, CheckFail, fmt.Sprintf("NOW(6) has whole seconds only (%d readings)", len(vals)),
				"a lease can end up to a second before it should, and a renewal within the second a lease was written changes nothing (the leader stands down)",
				"use a server whose NOW(6) has microseconds"},
			verdict{!micro, CheckWarn, fmt.Sprintf("NOW(6) has milliseconds only (%d readings)", len(vals)),
				"leases are judged a millisecond coarser than they are written", "keep LeaseDuration - RenewDeadline well above a millisecond (the default is 5 s)"})
		ch.judge(PropNowMonotonic, both(), fmt.Sprintf("%d readings of NOW(6) on one connection never went back", len(vals)),
			verdict{back > 0, CheckFail, fmt.Sprintf("one connection's NOW(6) went back by %d µs", back),
				"a lease measured by the database clock can end early: two leaders", "use one server whose clock does not step (NTP slewing, not stepping)"})
		// Two connections' clocks differ by offset µs at most.
		margin := ch.cfg.LeaseDuration - ch.cfg.Tuning.RenewDeadline
		d := time.Duration(offset) * time.Microsecond
		ch.judge(PropNowOneClock, both(), fmt.Sprintf("%d readings of a second connection's NOW(6) each fell between two of the first's", clockReads),
			verdict{offset > 0 && d >= margin/10, CheckFail, fmt.Sprintf("two connections' NOW(6) differ by up to %v: they are different clocks", d),
				fmt.Sprintf("a takeover judged by a clock that is ahead comes early: beyond LeaseDuration - RenewDeadline (%v) two leaders overlap", margin),
				"connect all candidates to one server, or synchronize the servers' clocks well within the margin"},
			verdict{offset > 0, CheckWarn, fmt.Sprintf("two connections' NOW(6) differ by up to %v: they are not the same clock (a proxy's servers, cluster nodes)", d),
				fmt.Sprintf("a takeover can come that much early; safe while it stays well below LeaseDuration - RenewDeadline (%v)", margin),
				"keep the servers' clocks synchronized (NTP), or connect all candidates to one server"})
	})
}

// locks: GET_LOCK with zero and fractional timeouts (getLock), IS_USED_LOCK,
// and the release of a lock when its session ends, on a scratch lock held by
// one connection (a) and tried by another (b).
func (ch *checker) locks() {
	ch.withConns(PropGetLock, lockOnly(), 2, func(cs []*sqlx.Conn) {
		lock := getlock.NewLock(getlock.Name(ch.site.Database, ch.site.Table, ch.name), ch.site.Flavor)
		a, b := &getlock.Conn{Lock: lock, Conn: cs[0].Conn}, &getlock.Conn{Lock: lock, Conn: cs[1].Conn}
		if _, err := ch.scanRow(0, a.Conn, &a.ID, `SELECT CONNECTION_ID()`); err != nil {
			ch.judge(PropGetLock, lockOnly(), "", failed("CONNECTION_ID()", err))
			return
		}
		if !ch.getLock(lock, a, b) {
			return
		}
		// IS_USED_LOCK, asked by b, names a, the holder.
		var holder sql.NullInt64
		_, err := ch.scanRow(0, b.Conn, &holder, `SELECT IS_USED_LOCK(`+getlock.Literal(lock.Name)+`)`)
		got := "NULL"
		if holder.Valid {
			got = strconv.FormatInt(holder.Int64, 10)
		}
		ch.judge(PropIsUsedLock, lockOnly(), fmt.Sprintf("IS_USED_LOCK from another session returned the holder's CONNECTION_ID() (%d)", a.ID),
			failed("IS_USED_LOCK", err),
			verdict{!holder.Valid || uint64(holder.Int64) != a.ID, CheckFail,
				fmt.Sprintf("IS_USED_LOCK from another session returned %s, not the holder's CONNECTION_ID() %d", got, a.ID),
				"the lock backend's holder checks it still holds the lock with IS_USED_LOCK(name) = CONNECTION_ID(): it would stand down, or keep leading after losing the lock",
				"use the table backend on this server"})
		// A lock is released when its session ends: once the holder's
		// connection closed, b's wait gets it.
		a.Discard()
		const wait = 3 * time.Second
		ok, d, err := ch.lockGet(b, lock.Wait(wait), wait)
		ch.judge(PropLockSessionEnd, lockOnly(), fmt.Sprintf("another session got the lock %v after its holder's connection closed", d.Round(time.Millisecond)),
			failed("GET_LOCK after the holder's connection closed", err),
			verdict{!ok, CheckFail, fmt.Sprintf("the lock was still held %v after its holder's connection closed", d.Round(time.Millisecond)),
				"a lock-backend leader that dies keeps the lock (a proxy that keeps or pins server sessions, a failover that moves them): no takeover, or a second holder after the proxy reconnects",
				"connect the lock backend to the server directly, not through a connection-pooling proxy; or use the table backend"})
	})
}

// lockGet runs s, a GET_LOCK, on c with extra time beyond a step's, and
// returns whether it got the lock and how long it took.
func (ch *checker) lockGet(c *getlock.Conn, s stmt.Stmt, extra time.Duration) (bool, time.Duration, error) {
	ctx, cancel := ch.step(extra)
	defer cancel()
	start := ch.cfg.Tuning.Clock.Now()
	ok, err := c.Get(ctx, s)
	return ok, ch.cfg.Tuning.Clock.Now().Sub(start), err
}

// getLock: a takes the free lock at once; b's zero and fractional waits
// must not get it, and must wait about what they asked. It returns false
// when a could not take the lock (nothing else can be checked).
func (ch *checker) getLock(lock getlock.Lock, a, b *getlock.Conn) bool {
	const frac = 300 * time.Millisecond
	if ok, _, err := ch.lockGet(a, lock.TryLock, 0); err != nil || !ok {
		ch.judge(PropGetLock, lockOnly(), "", failed("GET_LOCK(name, 0) on a free lock", cmp.Or(err, errors.New("it returned 0"))))
		return false
	}
	ok0, d0, err := ch.lockGet(b, lock.TryLock, 0)
	okF, dF := false, time.Duration(0)
	if err == nil {
		okF, dF, err = ch.lockGet(b, lock.Wait(frac), frac)
	}
	if err != nil {
		ch.judge(PropGetLock, lockOnly(), "", failed("GET_LOCK on a held lock", err))
		return false
	}
	var problems []string
	if ok0 || okF {
		problems = append(problems, "a second session got a lock another session held")
	}
	if d0 > time.Second {
		problems = append(problems, fmt.Sprintf("GET_LOCK(name, 0) on a held lock took %v", d0.Round(time.Millisecond)))
	}
	if dF < frac*2/3 || dF > 2*frac {
		problems = append(problems, fmt.Sprintf("a wait of %v returned after %v (the timeout was cut, or rounded up)", frac, dF.Round(time.Millisecond)))
	}
	ch.judge(PropGetLock, lockOnly(), fmt.Sprintf("GET_LOCK(name, 0) on a held lock returned 0 at once; a %v wait on a held lock returned 0 after %v",
		frac, dF.Round(time.Millisecond)),
		verdict{ok0 || okF, CheckFail, strings.Join(problems, "; "),
			"two lock-backend candidates can hold the election's lock at once: two leaders", "use the table backend on this server"},
		verdict{problems != nil, CheckWarn, strings.Join(problems, "; "),
			"waiting lock-backend candidates (and the table backend's fast handover) poll too often or block past their bound: slower takeovers, more load",
			"prefer the table backend on this server"})
	return true
}

// lockRowSQL is a locking read of a row: anchor.
func (ch *checker) lockRowSQL() string {
	return `SELECT anchor FROM ` + ch.tbl + ` WHERE anchor = ? FOR UPDATE`
}

// contended runs run with row ch.name locked by a transaction (ta) on a
// connection of its own, and a second connection (b) to contend for it.
// When that cannot be set up, it adds an unverified finding on property
// instead.
func (ch *checker) contended(property string, run func(ta *sqlx.Tx, b *sqlx.Conn)) {
	ch.withConns(property, none(), 2, func(cs []*sqlx.Conn) {
		// The transactions outlive a step: they are begun on ch.ctx, and
		// each statement has its own deadline.
		ta, err := cs[0].BeginTxx(ch.ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err == nil {
			defer func() { _ = ta.Rollback() }()
			_, err = ch.scanRow(0, ta, new(string), ch.lockRowSQL(), ch.name)
		}
		if err != nil {
			ch.judge(property, none(), "", failed("SELECT … FOR UPDATE", err))
			return
		}
		run(ta, cs[1])
	})
}

// skipLocked: with one row locked by A, B's SELECT … FOR UPDATE SKIP
// LOCKED of both rows gets only the other one, at once, and A's of B's row
// gets nothing (the Batcher's renewals rely on it).
func (ch *checker) skipLocked() {
	if _, err := ch.exec(`INSERT INTO `+ch.tbl+` (anchor, service_id, last_seen_active) VALUES (?, ?, NOW(6))`, ch.name2, probe.B); err != nil {
		ch.judge(PropSkipLocked, none(), "", failed("a second scratch row", err))
		return
	}
	ch.contended(PropSkipLocked, func(ta *sqlx.Tx, b *sqlx.Conn) {
		tb, err := b.BeginTxx(ch.ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}) // on ch.ctx, as contended's
		if err != nil {
			ch.judge(PropSkipLocked, none(), "", failed("a transaction", err))
			return
		}
		defer func() { _ = tb.Rollback() }()
		ctx, cancel := ch.step(0)
		defer cancel()
		skipLocked := `SELECT anchor FROM ` + ch.tbl + ` WHERE anchor IN (?, ?) FOR UPDATE SKIP LOCKED`
		var gotA, gotB []string
		if err := tb.SelectContext(ctx, &gotB, skipLocked, ch.name, ch.name2); err != nil {
			ch.judge(PropSkipLocked, none(), "", verdict{true, CheckWarn, fmt.Sprintf("SELECT … FOR UPDATE SKIP LOCKED failed: %v", err),
				"a Batcher cannot renew on this server (it needs MySQL 8.0 or MariaDB 10.6)", "do not use a Batcher (Config.Tuning.Batcher) here"})
			return
		}
		err = ta.SelectContext(ctx, &gotA, skipLocked, ch.name2, ch.name2)
		ch.judge(PropSkipLocked, none(), "SKIP LOCKED skipped the row another transaction locked, at once, and kept the one it took",
			failed("SKIP LOCKED of a row another transaction locked", err),
			verdict{len(gotB) != 1 || gotB[0] != ch.name2 || len(gotA) != 0, CheckFail,
				fmt.Sprintf("with row 1 locked by A, B's SKIP LOCKED of rows 1 and 2 got %q (want row 2 only), and then A's of row 2 got %q (want none)", gotB, gotA),
				"a Batcher's renewal can lock and renew a row another transaction holds (an operator's, a take over), or wait for it",
				"do not use a Batcher (Config.Tuning.Batcher) here"})
	})
}

// statementBounds: a locking read wrapped by the bound of the server's
// flavour (stmt.Bound) ends within about a second while another transaction
// holds the row, instead of waiting for the client to give up.
func (ch *checker) statementBounds() {
	const fix = "set innodb_lock_wait_timeout near QueryTimeout in the DSN (innodb_lock_wait_timeout=5"
	bound := stmt.NewBound(ch.site.Flavor, time.Second)
	if bound.Flavor == stmt.FlavorOther {
		ch.judge(PropStatementBounds, none(), "", verdict{true, CheckWarn, "the server is neither MariaDB nor MySQL 8.0.3+ (" + ch.report.Server + "): statements are sent without bounds",
			"a statement a candidate gave up on keeps its server thread waiting for a row lock up to innodb_lock_wait_timeout: a held row lock can fill max_connections",
			fix + ")"})
		return
	}
	ch.contended(PropStatementBounds, func(_ *sqlx.Tx, b *sqlx.Conn) {
		took, err := ch.scanRow(2*time.Second, b, new(string), bound.Wrap(ch.lockRowSQL()), ch.name)
		kind := map[stmt.Flavor]string{stmt.FlavorMySQL: "MAX_EXECUTION_TIME", stmt.FlavorMariaDB: "SET STATEMENT innodb_lock_wait_timeout"}[bound.Flavor]
		st, detail := CheckWarn, fmt.Sprintf("a locking read bounded to 1 s (%s) ended after %v with %v", kind, took.Round(time.Millisecond), err)
		switch n := mysqlerr.Errno(err); {
		case n == mysqlerr.LockWaitTimeout || n == mysqlerr.QueryTimeout || n == 1969: // 1969: MariaDB's max_statement_time
			st = CheckPass
		case err == nil:
			detail = "a locking read of a row another transaction holds returned at once"
		}
		if st == CheckPass && bound.Flavor == stmt.FlavorMySQL {
			v, _, err := ch.variable("session.innodb_lock_wait_timeout")
			secs, _ := strconv.ParseInt(v, 10, 64)
			if err == nil && secs > 2*stmt.WaitSecs(ch.cfg.Tuning.QueryTimeout) {
				st = CheckWarn
				detail += fmt.Sprintf("; but MySQL cannot bound a write's row-lock wait per statement, and innodb_lock_wait_timeout is %d s", secs)
			}
		}
		ch.judge(PropStatementBounds, none(), detail, verdict{st != CheckPass, st, detail,
			"statements a candidate gave up on keep their server threads waiting for a row lock (an operator's, a slow transaction): a held row lock can fill max_connections",
			fix + ": the driver sets it on every connection)"})
	})
}

// waitTimeout: the lock backend sets its connection's wait_timeout to the
// lease (the server drops a silent holder); pooled connections should
// outlive a lease of idleness.
func (ch *checker) waitTimeout() {
	leaseSecs := max(int64((ch.cfg.LeaseDuration+time.Second-1)/time.Second), 1) // rounded up
	v, _, err := ch.variable("session.wait_timeout")
	if err != nil {
		ch.judge(PropWaitTimeout, lockOnly(), "", failed("wait_timeout", err))
		return
	}
	secs, _ := strconv.ParseInt(v, 10, 64)
	ch.withConns(PropWaitTimeout, lockOnly(), 1, func(c []*sqlx.Conn) {
		ctx, cancel := ch.step(0)
		defer cancel()
		var set int64
		_, err := c[0].ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", leaseSecs))
		if err == nil {
			err = c[0].QueryRowContext(ctx, `SELECT @@session.wait_timeout`).Scan(&set)
		}
		ch.judge(PropWaitTimeout, lockOnly(),
			fmt.Sprintf("wait_timeout %d s outlives the lease (%d s), and a session may set its own (the lock backend's is the lease)", secs, leaseSecs),
			verdict{err != nil || set != leaseSecs, CheckFail, fmt.Sprintf("a session could not set wait_timeout to the lease (%d s): got %d (%v)", leaseSecs, set, err),
				"the lock backend relies on the server dropping a silent holder's session after a lease, which frees its lock",
				"use the table backend on this server"},
			verdict{secs < leaseSecs, CheckWarn, fmt.Sprintf("wait_timeout is %d s, shorter than the lease (%d s); a session may set its own", secs, leaseSecs),
				"idle pooled connections are dropped by the server between a candidate's statements: the driver retries, but the table backend's fast-handover lock connection is lost and followers poll",
				fmt.Sprintf("raise wait_timeout above the lease, or set wait_timeout=%d in the DSN", 2*leaseSecs)})
	})
}

// roundTrip: the slowest of a few round trips against the time a leader
// has to renew (RenewDeadline - RenewInterval, for a heartbeat and the
// read that may confirm it).
func (ch *checker) roundTrip() {
	var slowest time.Duration
	for range 5 {
		d, err := ch.scanRow(0, ch.db, new(int), `SELECT 1`)
		slowest = max(slowest, d)
		if err != nil {
			ch.judge(PropRoundTrip, both(), "", failed("SELECT 1", err))
			return
		}
	}
	room := ch.cfg.Tuning.RenewDeadline - ch.cfg.Tuning.RenewInterval
	detail := fmt.Sprintf("slowest of 5 round trips %v; a leader has %v (RenewDeadline - RenewInterval) to renew, in up to two round trips",
		slowest.Round(10*time.Microsecond), room)
	ch.judge(PropRoundTrip, both(), detail,
		verdict{2*slowest >= room, CheckFail, detail, "renewals do not complete before the renew deadline: leaders stand down again and again",
			"run the candidates near the database, or lengthen the lease (--lease, Config.LeaseDuration)"},
		verdict{slowest >= ch.cfg.Tuning.RenewInterval/10, CheckWarn, detail, "a slow network leaves little room for a retry before the renew deadline",
			"run the candidates near the database, or lengthen the lease"})
}

// cleanup deletes the scratch rows, even after ctx ended.
func (ch *checker) cleanup() {
	if ch.noWrites {
		return // nothing was written
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ch.ctx), ch.cfg.Tuning.QueryTimeout)
	defer cancel()
	if _, err := ch.db.ExecContext(ctx, `DELETE FROM `+ch.tbl+` WHERE anchor IN (?, ?)`, ch.name, ch.name2); err != nil {
		ch.judge(PropCleanup, none(), "", verdict{true, CheckWarn, fmt.Sprintf("the scratch rows %q and %q could not be deleted: %v", ch.name, ch.name2, err),
			"two stale rows in the election table (status lists them)", `DELETE FROM ` + ch.tbl + ` WHERE anchor LIKE '` + probe.ScratchPrefix + `%'`})
	}
}
