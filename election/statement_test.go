package election

import (
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// countPlaceholders counts the ? outside single quotes.
func countPlaceholders(sql string) int {
	n, quoted := 0, false
	for _, c := range sql {
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
		}
	}
	return n
}

// placeholders is n comma-separated placeholders.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// builtStatement is one statement as the library builds it, bound.
type builtStatement struct {
	what string
	sql  string
	args []any
}

// builtStatements builds every statement of the table backend and the
// Batcher for table (operator/statements_test.go checks the operators'), bound by bound, with arguments from p
// (p.Lease is the lease and, in the hand-off, the unserved delay).
func builtStatements(t *testing.T, table string, bound stmt.Bound, p stmt.Params, names []string) []builtStatement {
	t.Helper()
	tb := &tableBackend{backendBase: backendBase{cfg: settings{Config: Config{Table: table, Name: p.Name, ID: p.Me, LeaseDuration: time.Duration(p.Lease) * time.Millisecond, Value: p.Value}}, value: p.Value}}
	tb.stmts = tableStatements(tb.cfg.Table, bound, tb.cfg.LockDelay)
	tb.held = heldStatements(tb.cfg.Table, bound, bound)
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b, err := NewBatcher(db, BatcherOptions{Table: table, QueryTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var out []builtStatement
	add := func(what string, s stmt.Stmt, p stmt.Params) {
		q, args := s.Bind(p)
		out = append(out, builtStatement{what, q, args})
	}
	hp := tb.params(p.Hold)
	hp.Floor, hp.First = p.Floor, p.First
	add("heartbeat", tb.stmts.heartbeat, hp)
	add("renew", tb.stmts.renew, tb.params(p.Hold))
	add("release", tb.held[writeRelease].pool, tb.params(p.Hold))
	add("release in a transaction", tb.held[writeRelease].conn, tb.params(p.Hold))
	add("handOff", tb.held[writeHandOff].pool, tb.params(p.Hold))
	add("peek", stmt.Must(tb.stmts.peek), p)
	add("floor read", tb.stmts.floor.Read, p)
	add("floor raise", tb.stmts.floor.Raise, p)
	add("floor peek", stmt.Must(tb.stmts.floor.Peek[0]), p)
	add("batch bound", stmt.Must(b.sql.bound), p)
	add("batch restore", stmt.Must(b.sql.restore), p)
	addIn := func(what, query string) {
		q, args := stmt.In(query, names, nil)
		out = append(out, builtStatement{what, q, args})
	}
	addIn("batch lock", b.sql.lock)
	addIn("batch renew", b.sql.renew)
	addIn("batch read", bound.Wrap(b.sql.read))
	return out
}

// statementCase is a table, a bound and parameters to build every statement
// with.
type statementCase struct {
	table string
	bound stmt.Bound
	p     stmt.Params
	names []string // a Batcher's list of elections
}

// statementCases are the cases the statement tests build every statement
// with.
func statementCases() []statementCase {
	var out []statementCase
	for _, table := range []string{DefaultTable, "db1.elections"} {
		for _, bound := range []stmt.Bound{{}, stmt.NewBound(stmt.FlavorMariaDB, 5*time.Second), stmt.NewBound(stmt.FlavorMySQL, 3*time.Second)} {
			for _, p := range []stmt.Params{
				{Name: "e1", Me: "me", Hold: 0, Lease: 15000, Value: ""},
				{Name: "e2", Me: "you", Hold: 1763790000123456, Lease: 1, Value: "http://x:8080/?a=1",
					Floor: 1763790000123457, First: true, Term: 1763790000123458},
			} {
				names := []string{"e1"}
				if p.Name == "e2" {
					names = []string{"a", "b", "c", "d", "e"}
				}
				out = append(out, statementCase{table, bound, p, names})
			}
		}
	}
	return out
}

// TestStatementsPlaceholders: every statement the library builds has as many
// placeholders as arguments.
func TestStatementsPlaceholders(t *testing.T) {
	for _, c := range statementCases() {
		for _, s := range builtStatements(t, c.table, c.bound, c.p, c.names) {
			if n := countPlaceholders(s.sql); n != len(s.args) {
				t.Errorf("%s (%s, %+v): %d placeholders, %d arguments in %q", s.what, c.table, c.bound, n, len(s.args), s.sql)
			}
		}
		// The term floor's statements on many elections.
		f := tableStatements(c.table, c.bound, time.Second).floor
		terms := make([]uint64, len(c.names))
		for _, query := range []string{f.ReadAll, f.RaiseAll, f.CreateAll, f.CountAll, f.ResumeAll, f.Close, f.Append} {
			if q, args := stmt.In(query, c.names, terms); countPlaceholders(q) != len(args) {
				t.Errorf("(%s, %+v): %d placeholders, %d arguments in %q", c.table, c.bound, countPlaceholders(q), len(args), q)
			}
		}
		for _, s := range txStatements(c) {
			if n := countPlaceholders(s.sql); n != len(s.args) {
				t.Errorf("%s (%s, %+v): %d placeholders, %d arguments in %q", s.what, c.table, c.bound, n, len(s.args), s.sql)
			}
		}
	}
}

// txStatements are a Batcher's give-ups (Batcher.execGive) and the
// statements on election rows of a set-based batch of takes
// (Batcher.takeSet) as c builds them, with c.names (and a row of c.p's for
// each in the heartbeats).
func txStatements(c statementCase) []builtStatement {
	b := batchStatements(c.table, 4*time.Second)
	p := c.p
	p.To, p.Names, p.Terms = "to", c.names, make([]uint64, len(c.names))
	q, args := stmt.In(b.giveLock, c.names, nil)
	out := []builtStatement{{"batch give lock", q, args}}
	for w, s := range append(b.give[:], b.giveEnd) {
		q, args := s.Bind(p)
		out = append(out, builtStatement{fmt.Sprintf("batch give %d", w), q, args})
	}
	bs := b.bounded(c.bound)
	for _, s := range []struct{ what, query string }{{"batch take lock", bs.take.Lock}, {"batch take read", bs.take.Read}} {
		q, args := stmt.In(s.query, c.names, nil)
		out = append(out, builtStatement{s.what, q, args})
	}
	rows := make([]stmt.Params, len(c.names))
	for i, n := range c.names {
		rows[i] = c.p
		rows[i].Name = n
	}
	q, args = bs.take.Heartbeats.Bind(stmt.Params{Me: c.p.Me, Rows: rows})
	return append(out, builtStatement{"batch heartbeats", q, args})
}

// TestStatementsAsHandAssembled: the builder produces the statements that
// were assembled by hand before it (issue 15), up to whitespace, with the
// same arguments in the same order (those Bind writes as literals in
// their places), so the behaviour suite's verdicts on those statements
// carry over. legacyStatements is that code, kept here
// verbatim but for its receivers.
func TestStatementsAsHandAssembled(t *testing.T) {
	for _, c := range statementCases() {
		built := builtStatements(t, c.table, c.bound, c.p, c.names)
		legacy := legacyStatements(c.table, c.bound, c.p, c.names)
		if len(built) != len(legacy) {
			t.Fatalf("%d statements built, %d legacy", len(built), len(legacy))
		}
		for i, s := range built {
			l := legacy[i]
			l.sql, l.args = testdb.Inline(l.sql, l.args)
			if s.what != l.what {
				t.Fatalf("statement %d is %s, legacy %s", i, s.what, l.what)
			}
			if sqlShape(s.sql) != sqlShape(l.sql) {
				t.Errorf("%s (%s, %+v):\n%s\nwas\n%s", s.what, c.table, c.bound, s.sql, l.sql)
			}
			if !reflect.DeepEqual(s.args, l.args) {
				t.Errorf("%s (%s, %+v): arguments %#v, were %#v", s.what, c.table, c.bound, s.args, l.args)
			}
		}
	}
}

// TestStatementsReadNoSessionClock: no statement on the caller's pool reads
// NOW(): a SET @@timestamp left there moves it (doc.go, "What is not
// guaranteed"). Every time they write or judge is dbclock.Now.
func TestStatementsReadNoSessionClock(t *testing.T) {
	tbl := quoteTable(DefaultTable)
	h := heldStatements(DefaultTable, stmt.Bound{}, stmt.Bound{})
	text := func(s rowStmt) string { q, _ := s.conn.Bind(stmt.Params{}); return q }
	all := []builtStatement{{what: "handOver", sql: text(h[writeHandOver])}, {what: "proclaim", sql: text(h[writeProclaim])},
		{what: "prefer", sql: text(h[writePrefer])}, {what: "fenced check", sql: fencedCheckSQL(tbl)},
		{what: "fenced write", sql: fencedWriteSQL(tbl)}}
	for _, c := range statementCases() {
		all = append(all, builtStatements(t, c.table, c.bound, c.p, c.names)...)
		all = append(all, txStatements(c)...)
	}
	f := tableStatements(DefaultTable, stmt.Bound{}, time.Second).floor
	for _, s := range []stmt.Stmt{f.Marker, f.Sum, f.Count, f.Seed, f.Mark} {
		q, _ := s.Bind(stmt.Params{})
		all = append(all, builtStatement{what: "the floor's marker", sql: q})
	}
	for _, s := range all {
		// dbclock.Trusted compares SYSDATE(6) with NOW(6) (issue 31): it
		// judges no time.
		if strings.Contains(strings.ToUpper(strings.ReplaceAll(s.sql, `SYSDATE(6)<>NOW(6)`, "")), "NOW(") {
			t.Errorf("%s reads NOW():\n%s", s.what, s.sql)
		}
	}
}

// expiredSQL is the heartbeat's expiry (internal/probe's), as written.
const expiredSQL = `last_seen_active+INTERVAL lease_ms*1000 MICROSECOND<=` + dbclock.Now

// legacyStatements are the statements of builtStatements as
// tableBackend.prepareSQL, heartbeatArgs, release, Batcher.execRenew,
// and execRead assembled them by hand before the builder,
// with the heartbeat's conditions and the check extended by hand for
// transfer_to and priority (issue 14), so that they still check the
// builder's arguments. Since issue 20 they write the server's clock
// (dbclock.Now) and check the session's (sessionClockSQL), as the built ones do.
// Since issue 22 the heartbeat's insert takes how it acquires as an
// argument (:insert, was IF(:first, 'first', 'insert')), and it tests
// released as a truth value (was released <> 0 and IF(released = 0, …)),
// and its insert leaves released to the column's default (0): the same
// values, in fewer bytes. (transfer_to IS NULL OR transfer_to = ?) became
// IFNULL(transfer_to = ?, 1), and the released branch's test for a
// transfer_to that is NULL or empty took the same form: the same truth
// values. And since issue 22 no statement reads the session's NOW(6):
// expiry is judged by dbclock.Now, and the session check (sessionClockSQL, was
// NOW(6) <= SYSDATE(6) AND dbclock.Trusted) is dbclock.Trusted alone. Since issue 31 the
// statements a pooled connection runs outside a transaction also check
// commitsSQL, and release has a variant without it, for a transaction.
func legacyStatements(table string, bound stmt.Bound, p stmt.Params, batch []string) []builtStatement {
	tbl, ftbl := quoteTable(table), quoteTable(table+"_floor")
	const r = `service_id = ? AND term = ? AND released = 0 AND IFNULL(transfer_to = ?, 1)`
	heartbeatSQL := bound.Wrap(`INSERT INTO ` + tbl + ` (anchor, service_id, term, term_started_at, last_seen_active, lease_ms, acquired, value, priority)
VALUES (IF(` + dbclock.Trusted + `, ?, NULL), ?, LAST_INSERT_ID(GREATEST(` + dbclock.TermNow + `, ? + 1)), ` + dbclock.Now + `, ` + dbclock.Now + `, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
decision = CASE
WHEN ` + r + ` THEN 'renewed'
WHEN released AND transfer_to = ? THEN 'transferred'
WHEN ` + expiredSQL + ` THEN IF(released, 'released', 'expired')
WHEN released = 0 THEN IF(service_id = ? AND transfer_to IS NULL, 'claimed', NULL)
WHEN IFNULL(transfer_to = '', 1) THEN 'released'
END,
acquired = IF(decision > 1, decision, acquired),
term_started_at = IF(decision > 1, ` + dbclock.Now + `, term_started_at),
term = LAST_INSERT_ID(IF(decision > 1, GREATEST(term + 1, ` + dbclock.TermNow + `, ? + 1), term)),
service_id = IF(decision, ?, service_id),
value = IF(decision, ?, value),
backend = IF(decision, 'table', backend),
connection_id = IF(decision, NULL, connection_id),
transfer_to = IF(decision, NULL, transfer_to),
released = IF(decision, 0, released),
lease_ms = IF(decision, ?, lease_ms),
last_seen_active = IF(decision, ` + dbclock.Now + `, last_seen_active),
priority = IF(decision, ?, priority),
decision = NULL`)
	releaseTxSQL := `UPDATE ` + tbl + ` SET released = 1, transfer_to = NULL WHERE anchor = ? AND service_id = ? AND term = ? AND released = 0 AND ` + dbclock.Trusted
	releaseSQL := bound.Wrap(releaseTxSQL + ` AND ` + commitsSQL)
	handOffSQL := bound.Wrap(`UPDATE ` + tbl + ` SET last_seen_active = ` + dbclock.Now + `, lease_ms = ?, transfer_to = NULL WHERE anchor = ? AND service_id = ? AND term = ? AND released = 0 AND ` + dbclock.Trusted + ` AND ` + commitsSQL)
	peekSQL := `SELECT ` + probe.RecordColumns + `, decision FROM ` + tbl + ` WHERE 1 = 0`

	me, hold, lease, val := p.Me, p.Hold, p.Lease, p.Value
	args := []any{p.Name, me, p.Floor, lease, insertOf(p), val, p.Priority, // the insert
		me, hold, me, // R
		me,      // transferred
		me,      // claimed
		p.Floor, // term
		me, val, lease, p.Priority}

	names := make([]any, len(batch))
	for i, n := range batch {
		names[i] = n
	}
	return []builtStatement{
		{"heartbeat", heartbeatSQL, args},
		{"renew", bound.Wrap(`UPDATE ` + tbl + ` SET value = ?, backend = 'table', connection_id = NULL, transfer_to = NULL,
  released = 0, lease_ms = ?, last_seen_active = ` + dbclock.Now + `, priority = ?
WHERE anchor = ? AND ` + r + ` AND ` + dbclock.Trusted + ` AND ` + commitsSQL), []any{val, lease, p.Priority, p.Name, me, hold, me}},
		{"release", releaseSQL, []any{p.Name, me, hold}},
		{"release in a transaction", bound.Wrap(releaseTxSQL), []any{p.Name, me, hold}},
		{"handOff", handOffSQL, []any{lease, p.Name, me, hold}},
		{"peek", peekSQL, []any{}},
		{"floor read", bound.Wrap(`SELECT term_floor FROM ` + ftbl + ` WHERE anchor = ? FOR UPDATE`), []any{p.Name}},
		{"floor raise", bound.Wrap(`INSERT INTO ` + ftbl + ` (anchor, term_floor) VALUES (?, ?)
ON DUPLICATE KEY UPDATE term_floor = GREATEST(term_floor, ?), terms = terms + 1`), []any{p.Name, p.Term, p.Term}}, // terms: schema version 10
		{"floor peek", `SELECT term_floor, marked_at FROM ` + ftbl + ` WHERE 1 = 0`, []any{}}, // marked_at: schema version 8
		{"batch bound", `SET @sqlelect_wait_timeout = @@session.wait_timeout,
  @sqlelect_innodb_lock_wait_timeout = @@session.innodb_lock_wait_timeout,
  @sqlelect_lock_wait_timeout = @@session.lock_wait_timeout,
  SESSION wait_timeout = 4, SESSION innodb_lock_wait_timeout = 4, SESSION lock_wait_timeout = 4`, []any{}},
		{"batch restore", `SET SESSION wait_timeout = @sqlelect_wait_timeout,
  SESSION innodb_lock_wait_timeout = @sqlelect_innodb_lock_wait_timeout,
  SESSION lock_wait_timeout = @sqlelect_lock_wait_timeout`, []any{}},
		{"batch lock", `SELECT anchor, service_id, term FROM ` + tbl +
			` WHERE anchor IN (` + placeholders(len(names)) + `) AND released = 0 AND transfer_to IS NULL AND ` + dbclock.Trusted + ` FOR UPDATE SKIP LOCKED`, names},
		{"batch renew", `UPDATE ` + tbl + ` FORCE INDEX (PRIMARY) SET last_seen_active = ` + dbclock.Now + ` WHERE anchor IN (` +
			placeholders(len(names)) + `)`, names},
		{"batch read", bound.Wrap(`SELECT ` + probe.RecordColumns + ` FROM ` + tbl +
			` WHERE anchor IN (` + placeholders(len(names)) + `)`), names},
	}
}

// TestHeartbeatSize keeps the heartbeat what a DBA can read in the
// processlist: for the default table, at most 1.5 KiB as written (without
// a session bound's prefix; the values add the candidate's ID and name),
// one CASE that decides, and the expiry judged in at most two of its
// branches.
func TestHeartbeatSize(t *testing.T) {
	q, args := stmt.Must(probe.HeartbeatSQL(quoteTable("service_election"))).Bind(stmt.Params{})
	t.Logf("heartbeat: %d bytes as written, %d placeholders, %d NOW(6), %d SYSDATE(6)",
		len(q), len(args), strings.Count(q, "NOW(6)"), strings.Count(q, "SYSDATE(6)"))
	if len(q) > 1536 {
		t.Errorf("heartbeat: %d bytes as written; want at most 1536", len(q))
	}
	if n := strings.Count(q, "CASE"); n != 1 {
		t.Errorf("heartbeat: %d CASE; want the one that decides", n)
	}
	if n := strings.Count(q, expiredSQL); n < 1 || n > 2 {
		t.Errorf("heartbeat: the expiry judged %d times; want once or twice", n)
	}
	// As the general log shows it: with MariaDB's and MySQL's bounds,
	// and the values of a candidate with the default ID on this host,
	// election "default", a term and a floor of 16 digits.
	id := DefaultID()
	for _, b := range []stmt.Bound{{Flavor: stmt.FlavorMariaDB, Secs: 5}, {Flavor: stmt.FlavorMySQL, Secs: 5}} {
		const term = 1795604384494302
		q, args := stmt.Must(b.Wrap(probe.HeartbeatSQL(quoteTable("service_election")))).Bind(
			stmt.Params{Name: "default", Me: id, Hold: term, Lease: 15000, Floor: term})
		t.Logf("heartbeat as sent (%+v, ID %q): %d bytes", b, id, sentSize(q, args))
	}
}

// sentSize is the size of query as the server's general log shows it once
// the driver sends args: strings quoted, numbers in decimal, booleans 0/1.
func sentSize(query string, args []any) int {
	n := len(query) - strings.Count(query, "?")
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += len(strconv.Quote(v))
		case bool:
			n++
		default:
			n += len(fmt.Sprint(v))
		}
	}
	return n
}

// TestLockStatementsAsHandAssembled: the lock backend's statements, compiled
// from named parameters (issue 22), are those its closures assembled by hand
// before, with the same arguments of the same types: each is compared with
// its arguments written into its text. legacyLockStatements is that code,
// kept here verbatim but for its receivers and the flattening of its
// closures. The anchor, once a literal, is now an argument.
func TestLockStatementsAsHandAssembled(t *testing.T) {
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, c := range statementCases() {
		for _, adopt := range []int64{0, 26000} {
			l, err := NewLock(db, Config{Table: c.table, Name: c.p.Name, ID: c.p.Me, Value: c.p.Value,
				LeaseDuration: 15 * time.Second, Preference: PreferenceConfig{Priority: 3, Tenure: 1500 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			b := backendOf(l).(*lockBackend)
			b.adopt = adopt
			lock := getlock.NewLock(getlock.Name("app", c.table, c.p.Name), c.bound.Flavor)
			b.prepare(lock, c.bound)
			built := builtLockStatements(b, c.p)
			legacy := legacyLockStatements(b, lock, c.bound, c.p)
			if len(built) != len(legacy) {
				t.Fatalf("%d statements built, %d legacy", len(built), len(legacy))
			}
			for i, s := range built {
				l := legacy[i]
				if s.what != l.what {
					t.Fatalf("statement %d is %s, legacy %s", i, s.what, l.what)
				}
				if got, was := sqlShape(interpolate(s.sql, s.args)), sqlShape(interpolate(testdb.Inline(l.sql, l.args))); got != was {
					t.Errorf("%s (%s, %+v, adopt %d):\n%s\nwas\n%s", s.what, c.table, c.bound, adopt, got, was)
				}
			}
		}
	}
}

// sqlShape is sql up to whitespace: runs of it become one space, and none
// is kept next to a comma, parenthesis or operator (the heartbeat is sent
// without those spaces, to keep it short).
func sqlShape(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	for _, p := range []string{",", "=", "<", ">", "+", "*", "-", "(", ")"} {
		s = strings.ReplaceAll(s, " "+p, p)
		s = strings.ReplaceAll(s, p+" ", p)
	}
	return s
}

// interpolate writes args into sql's placeholders (outside single quotes)
// as their Go type and value, so that two statements compare equal when
// they send the server the same statement with the same values.
func interpolate(sql string, args []any) string {
	var b strings.Builder
	quoted, i := false, 0
	for _, c := range sql {
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted && i < len(args):
			fmt.Fprintf(&b, "%T(%#v)", args[i], args[i])
			i++
			continue
		}
		b.WriteRune(c)
	}
	for ; i < len(args); i++ {
		fmt.Fprintf(&b, " extra %T(%#v)", args[i], args[i])
	}
	return b.String()
}

// builtLockStatements binds every statement of the lock backend b with
// arguments from p (p.Hold the term held and the term read, p.Lease the
// unserved delay and the transfer window in milliseconds).
func builtLockStatements(b *lockBackend, p stmt.Params) []builtStatement {
	var out []builtStatement
	add := func(what string, s stmt.Stmt, p stmt.Params) {
		q, args := s.Bind(p)
		out = append(out, builtStatement{what, q, args})
	}
	add("session", b.sql.session, stmt.Params{})
	add("read", b.sql.read, b.params(0))
	add("peek", stmt.Must(probe.Privileges(quoteTable(b.cfg.Table))[0].Query), stmt.Params{}) // the preflight's (lockBackend.preflight)
	add("pass", b.sql.pass, stmt.Params{})
	add("try lock", b.lc.Lock.TryLock, stmt.Params{})
	add("is mine", b.lc.Lock.IsMine, stmt.Params{})
	add("release lock", b.lc.Lock.Release, stmt.Params{})
	add("wait", b.lc.Lock.Wait(300*time.Millisecond), stmt.Params{})
	tp := b.params(0)
	tp.Acquired, tp.Term, tp.Floor, tp.First = "claimed", p.Hold, p.Floor, false
	add("take", b.sql.take, tp)
	ip := b.params(0)
	ip.Floor, ip.First = p.Floor, p.First
	add("insert", b.sql.insert, ip)
	add("placeholder", b.sql.placeholder, ip)
	add("renew", b.sql.renew, b.params(p.Hold))
	for _, s := range []struct {
		what string
		rs   rowStmt
		p    stmt.Params
	}{
		{"release", b.held[writeRelease], b.params(p.Hold)},
		{"handOff", b.held[writeHandOff], func() stmt.Params {
			_, q := surrender{unserved: time.Duration(p.Lease) * time.Millisecond}.stmt(b.params(p.Hold), b.adopt)
			return q
		}()},
		{"handOver", b.held[writeHandOver], func() stmt.Params {
			g := surrender{over: true, to: p.To, window: time.Duration(p.Lease) * time.Millisecond}
			_, q := g.stmt(b.params(p.Hold), b.adopt)
			return q
		}()},
		{"proclaim", b.held[writeProclaim], b.params(p.Hold)},
		{"prefer", b.held[writePrefer], func() stmt.Params {
			q := b.params(0)
			q.Term, q.Tenure = p.Hold, ceilMillis(b.cfg.Preference.Tenure)
			return q
		}()},
	} {
		add(s.what, s.rs.conn, s.p)
		add(s.what+" pooled", s.rs.pool, s.p)
	}
	return out
}

// legacyLockStatements are the statements of builtLockStatements as
// lockBackend.prepare and newUserLock assembled them before issue 22, with
// b's configuration, lock and bound.
func legacyLockStatements(b *lockBackend, l getlock.Lock, bound stmt.Bound, p stmt.Params) []builtStatement {
	cfg := b.cfg
	secs := max(int64(math.Ceil(cfg.LeaseDuration.Seconds())), 1)
	tbl, anchor := quoteTable(cfg.Table), getlock.Literal(cfg.Name)
	lease := max(ceilMillis(cfg.LeaseDuration), b.adopt)
	wait := stmt.WaitSecs(cfg.QueryTimeout)
	session, _ := stmt.SessionSQL(false, stmt.SessionVar{Name: "wait_timeout", Value: secs}, stmt.SessionVar{Name: "interactive_timeout", Value: secs},
		stmt.SessionVar{Name: "innodb_lock_wait_timeout", Value: wait}, stmt.SessionVar{Name: "lock_wait_timeout", Value: wait},
		stmt.SessionVar{Name: "timestamp", Value: "DEFAULT"}, stmt.SessionVar{Name: "time_zone", Value: "'+00:00'"},
		stmt.SessionVar{Name: "autocommit", Value: 1}, stmt.SessionVar{Name: "completion_type", Value: "'NO_CHAIN'"}) // issue 31
	lit := getlock.Literal(l.Name)
	passSQL := func(d time.Duration) string {
		hint, call := getlock.Call(lit, d, l.MariaDB)
		return `SELECT ` + hint + `CASE WHEN IS_USED_LOCK(` + lit + `) IS NULL THEN -1
  WHEN ` + call + ` = 1 THEN RELEASE_LOCK(` + lit + `) ELSE 0 END`
	}
	waitSQL := func(d time.Duration) string {
		hint, call := getlock.Call(lit, d, l.MariaDB)
		return `SELECT ` + hint + call
	}
	floorTerm := `GREATEST(` + dbclock.TermNow + `, ? + 1)`
	take := `UPDATE ` + tbl + ` SET service_id = ?,
  term = LAST_INSERT_ID(GREATEST(term + 1, ` + floorTerm + `)),
  term_started_at = ` + dbclock.Now + `, last_seen_active = ` + dbclock.Now + `, lease_ms = ?, released = 0,
  acquired = ?, value = ?, backend = 'lock', connection_id = CONNECTION_ID(), transfer_to = NULL, priority = ?
WHERE anchor = ` + anchor + ` AND term = ?`
	insert := `INSERT INTO ` + tbl + ` (anchor, service_id, term, term_started_at, last_seen_active,
  lease_ms, released, acquired, value, backend, connection_id, priority)
VALUES (` + anchor + `, ?, LAST_INSERT_ID(` + floorTerm + `), ` + dbclock.Now + `, ` + dbclock.Now + `, ?, 0, ?, ?, 'lock', CONNECTION_ID(), ?)`
	placeholder := `INSERT INTO ` + tbl + ` (anchor, service_id, last_seen_active, term, term_started_at,
  lease_ms, released, acquired, value, backend, connection_id, priority)
VALUES (` + anchor + `, ?, NOW(6), LAST_INSERT_ID(` + floorTerm + `), NOW(6), ?, 0, ?, '', 'lock', NULL, ?)`
	renew := `UPDATE ` + tbl + ` SET last_seen_active = ` + dbclock.Now + `, lease_ms = ?, value = ?,
  backend = 'lock', connection_id = CONNECTION_ID(), transfer_to = NULL, priority = ?
WHERE anchor = ` + anchor + ` AND service_id = ? AND term = ? AND released = 0
  AND (transfer_to IS NULL OR transfer_to = service_id)`
	held := ` WHERE anchor = ` + anchor + ` AND service_id = ? AND term = ? AND released = 0 AND ` + dbclock.Trusted
	release := `UPDATE ` + tbl + ` SET released = 1, transfer_to = NULL` + held
	handOff := stmt.Must(`UPDATE ` + tbl + ` SET ` + handOffSets + ` WHERE ` + heldCond)
	handOver := `UPDATE ` + tbl + ` SET released = 1, transfer_to = NULLIF(?, ''), last_seen_active = ` + dbclock.Now + `, lease_ms = ?` + held
	proclaim := `UPDATE ` + tbl + ` SET value = ?` + held
	prefer := stmt.Must(preferSQL(tbl))

	// The anchor was a literal: it is now the first argument.
	lit1 := func(q string, args ...any) builtStatement {
		return builtStatement{"", strings.Replace(q, anchor, "?", 1), append([]any{cfg.Name}, args...)}
	}
	// … or a later one, after the assignments' arguments.
	litAt := func(q string, at int, args ...any) builtStatement {
		args = append(append(append([]any{}, args[:at]...), cfg.Name), args[at:]...)
		return builtStatement{"", strings.Replace(q, anchor, "?", 1), args}
	}
	named := func(what string, s builtStatement) builtStatement { s.what = what; return s }
	hold, value := p.Hold, b.value
	handOffQ, handOffArgs := handOff.Bind(stmt.Params{Name: cfg.Name, Me: cfg.ID, Hold: hold, Lease: max(p.Lease, b.adopt)})
	preferQ, preferArgs := prefer.Bind(stmt.Params{Name: cfg.Name, Me: cfg.ID, Term: hold, Priority: cfg.Preference.Priority,
		Tenure: ceilMillis(cfg.Preference.Tenure)})
	out := []builtStatement{
		{"session", session, nil},
		{"read", `SELECT ` + probe.RecordColumns + ` FROM ` + tbl + ` WHERE anchor = ` + anchor, nil},
		{"peek", `SELECT ` + probe.RecordColumns + ` FROM ` + tbl + ` WHERE 1 = 0`, nil},
		{"pass", passSQL(b.lockWait), nil},
		{"try lock", `SELECT GET_LOCK(` + lit + `, 0)`, nil},
		{"is mine", `SELECT IS_USED_LOCK(` + lit + `) = CONNECTION_ID()`, nil},
		{"release lock", `SELECT RELEASE_LOCK(` + lit + `)`, nil},
		{"wait", waitSQL(300 * time.Millisecond), nil},
		named("take", litAt(take, 6, cfg.ID, p.Floor, lease, "claimed", value, cfg.Preference.Priority, hold)),
		named("insert", lit1(insert, cfg.ID, p.Floor, lease, insertOf(p), value, cfg.Preference.Priority)),
		named("placeholder", lit1(placeholder, cfg.ID, p.Floor, lease, insertOf(p), cfg.Preference.Priority)),
		named("renew", litAt(renew, 3, lease, value, cfg.Preference.Priority, cfg.ID, hold)),
	}
	for _, s := range []builtStatement{
		named("release", litAt(release, 0, cfg.ID, hold)),
		{"handOff", handOffQ, handOffArgs},
		named("handOver", litAt(handOver, 2, p.To, p.Lease, cfg.ID, hold)),
		named("proclaim", litAt(proclaim, 1, value, cfg.ID, hold)),
		{"prefer", preferQ, preferArgs},
	} {
		// Since issue 31 the pooled ones check commitsSQL.
		out = append(out, s, builtStatement{s.what + " pooled", bound.Wrap(s.sql + ` AND ` + commitsSQL), s.args})
	}
	return out
}

// insertOf is :insert with p: how an insert acquires the row.
func insertOf(p stmt.Params) string {
	if p.First {
		return "first"
	}
	return "insert"
}
