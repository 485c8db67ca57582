package election

import (
	"time"

	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/takeset"
)

// Every statement the backends run on the election's table, top to bottom:
// first what both backends share (the session checks and row conditions,
// the reads of the row, the statements a holder runs on its row, the
// fence), then the table backend's (the renewal, a Batcher's;
// its heartbeat is internal/probe's), then the lock backend's. One file rather than one per
// backend: the two share their conditions and the holder's statements.
//
// Each is written once as SQL with named parameters (:name, :me, :hold, …),
// compiled by internal/stmt, which binds the arguments from a stmt.Params
// (a Batcher's lists of elections too, :names and :terms): the library's
// one parameter mechanism. Not here: the term floor's
// statements (internal/floor: both backends and Assume run them in one
// transaction with a term's write) and the GET_LOCK statements
// (internal/getlock's Lock: the lock backend's lock, the table backend's
// wake-up hint, and the doctor's checks of both). Nor the heartbeat's text
// (probe.HeartbeatSQL, with its decision and the row condition HoldsCond)
// and the column list of a row (probe.RecordColumns): internal/probe, since
// Run's preflight and the doctor probe the server with them; and the
// statements of that preflight.

// ---- Shared by both backends ----

// The database clock, and the session state sqlelect did not set.
//
// The caller owns the pool, and its own code may leave session state on a
// connection that a candidate's statement then runs on: SET @@timestamp
// moves NOW(6) (which is then the set value, not the statement's start), and
// a time_zone with daylight saving time makes local times jump by an hour,
// so that TIMESTAMP arithmetic and conversions across a change are off by
// that hour. sqlelect does not trust session state it did not set:
//
//   - Every time a statement on the caller's pool writes or judges (a
//     lease's start, a term, whether a lease ran out or is still live) is
//     dbclock.Now, SYSDATE(6): the server's clock when it is evaluated, which
//     no session can set. No time is NOW(6). The heartbeat judges expiry
//     once (its decision), so that one reading decides for the whole
//     statement.
//   - Every such statement also checks dbclock.Trusted: that the session's time
//     zone has no daylight saving time, and that SYSDATE(6) is not NOW(6),
//     which it is on a server run with --sysdate-is-now (then a session's
//     SET @@timestamp moves it). Otherwise it changes nothing: the
//     heartbeat fails (see unsafeSessionSQL in internal/probe), the others
//     match no row. Run checks both at preflight; the statement checks
//     them again, since the server a pool reaches may change (a failover)
//     while Run goes on.
//   - The lock backend's connection is sqlelect's own: it sets the session's
//     clock and time zone when it takes the connection (lockSessionSQL).

// Whether a statement commits (issue 31, item 3). A session with
// autocommit=0, or one left in the transaction that COMMIT AND CHAIN opens
// (completion_type=CHAIN), keeps a statement's change uncommitted: a renewal
// reported as 1 affected row would not be seen by anyone else, and its
// rollback (the connection recycled, or killed by a DBA) exposes an expired
// row while the leader still believes. sqlelect does not trust the session's
// commit mode either:
//
//   - Every take, and every heartbeat, runs in a transaction the library
//     begins and ends with COMMIT AND NO CHAIN
//     (floor.InConnTx): BEGIN ends whatever transaction the session had open, and
//     the COMMIT commits whatever the session's autocommit and
//     completion_type. Or on the lock backend's own connection, whose
//     session sets autocommit and completion_type itself.
//   - The statements the table backend runs on a pooled connection outside
//     a transaction (the renewal, release, hand-off, hand-over, proclaim,
//     prefer) check commitsSQL and change nothing otherwise (a constant
//     condition: no row is read or locked). A renewal refused so falls back
//     to the heartbeat, in its transaction; the others run again in a
//     transaction of the library's (backendBase.writeRow).
//   - Run refuses a session that does not commit each statement
//     (internal/probe's judgeCommits, ErrNoAutocommit): set in the DSN, it would be on every
//     connection.

// commitsSQL is true when a statement the session runs outside a
// transaction commits when it ends: autocommit is on, and no COMMIT AND
// CHAIN (completion_type=CHAIN) may have left a transaction open.
const commitsSQL = `@@autocommit AND @@completion_type<>'CHAIN'`

// The database clock for the times statements write and judge is
// dbclock.Now. dbclock.Trusted is true when the session's time zone keeps
// one offset from UTC all year (the same offset in January and July), as
// internal/probe's judgeTimeZone checks in Run's preflight, and SYSDATE(6)
// is the server's clock at the call, not the statement's start (NOW(6)), as
// probe.CheckSysdate checks: a statement is parsed between the two, so they
// differ by microseconds at least, unless the server runs with
// --sysdate-is-now. A constant the server computes once per statement.
// dbclock.TermNow is the database clock in microseconds: a new term, or
// with GREATEST(term + 1, …) one never less than the previous term plus
// one. dbclock.TermNew is a new term: the database clock in microseconds,
// and above the election's term floor :floor (see floor.InTx), so above
// every term issued before whatever the clock says.

// heldCond matches election :name's row while the candidate holds it, on a
// session whose time zone has no daylight saving time (see dbclock.Trusted).
const heldCond = `anchor = :name AND ` + probe.HoldsCond + ` AND ` + dbclock.Trusted

// readSQL reads election :name's row on table tbl (quoted), for
// Record.scan: who leads, as Status, Leader and a follower see it.
func readSQL(tbl string) string {
	return `SELECT ` + probe.RecordColumns + ` FROM ` + tbl + ` WHERE anchor = :name`
}

// handOffSets gives a held row up without marking it released: it expires
// the given number of milliseconds from now by the database clock, so that
// the next holder takes an expired row after the lock delay the releaser had
// not served (see candidate.releaseHold). Releases drop a pending planned
// change (transfer_to): the releaser will not act on it, and a row left
// reserved would make the target, or nobody, wait a whole lease.
const handOffSets = `last_seen_active = ` + dbclock.Now + `, lease_ms = :lease, transfer_to = NULL`

// handOverSets gives a held row up for a planned change of leader: marked
// released, and reserved for :to (for anyone when it is empty) until the
// row's lease, :lease milliseconds from now by the database clock (the
// transfer window), runs out. See reservedCond.
const handOverSets = `released = 1, transfer_to = NULLIF(:to, ''), last_seen_active = ` + dbclock.Now + `, lease_ms = :lease`

// rowWrite is one of the statements on the election's row that a holder
// runs (a follower's prefer too), in heldStmts: a leader-guarded change of
// the row, run alike by both backends (backend.writeRow). The first three
// give the row up, in a transaction with writeEnd (giveUpTx).
type rowWrite uint8

const (
	writeRelease  rowWrite = iota // marks the row released
	writeHandOff                  // leaves it to expire in :lease (an unserved lock delay)
	writeHandOver                 // marks it released and reserved for :to for :lease
	writeProclaim                 // writes :value into it
	writePrefer                   // asks the leader of term :term to hand over (see preferSQL)
	writeEnd                      // ends term :hold in the history: transferred to :to, or resigned (in giveUpTx)
)

// heldStmts are the statements a holder of either backend runs on its
// election's row of table tbl (quoted), while the row names its term :hold,
// on a session whose clock is trusted (heldCond), and on the election's
// history (writeEnd), indexed by rowWrite.
type heldStmts [writeEnd + 1]rowStmt

// heldStatements returns the heldStmts of election table table, bounded by
// conn and pool as rowStmt says.
func heldStatements(table string, conn, pool stmt.Bound) heldStmts {
	tbl, give := quoteTable(table), giveSets()
	return heldStmts{
		writeRelease:  newRowStmt(`UPDATE `+tbl+` SET `+give[writeRelease]+` WHERE `+heldCond, conn, pool),
		writeHandOff:  newRowStmt(`UPDATE `+tbl+` SET `+give[writeHandOff]+` WHERE `+heldCond, conn, pool),
		writeHandOver: newRowStmt(`UPDATE `+tbl+` SET `+give[writeHandOver]+` WHERE `+heldCond, conn, pool),
		writeProclaim: newRowStmt(`UPDATE `+tbl+` SET value = :value WHERE `+heldCond, conn, pool),
		writePrefer:   newRowStmt(preferSQL(tbl), conn, pool),
		// Only while the history leaves the term open.
		writeEnd: newRowStmt(`UPDATE `+quoteTable(floor.History(table))+` SET `+endSets+` WHERE anchor = :name AND term = :hold AND ended_at IS NULL AND `+dbclock.Trusted, conn, pool),
	}
}

// giveSets are the changes of the statements that give a held row up,
// indexed by rowWrite, and endSets the end of the term they write into the
// history; a Batcher's (execGive) are the same.
func giveSets() [writeHandOver + 1]string {
	return [...]string{`released = 1, transfer_to = NULL`, handOffSets, handOverSets}
}

const endSets = `ended_at = ` + dbclock.TermNow + `, ended = IF(:to = '', 'resigned', 'transferred')`

// preferSQL is a follower's request for leadership by preference on table
// tbl (quoted): it sets transfer_to to the follower (:me) on the row it saw
// (term :term), only while that row is still live and held by another
// candidate, no planned change is pending, the holder's priority is lower
// than the follower's (:priority), and the holder has led for the
// follower's tenure (:tenure milliseconds) by the database clock, and the
// row is not an operator's assignment its candidate has yet to claim
// (acquired 'operator': nobody would act on a request, and the operator's
// choice would be lost to the row's expiry). One
// statement decides, under the row lock, so the follower's view of the row
// (read a moment before) only saves it the statement when it would change
// nothing. The holder sees the request at its next renewal and hands over
// as for operator.Transfer (see Candidate.handOver).
func preferSQL(tbl string) string {
	return `UPDATE ` + tbl + ` SET transfer_to = :me
WHERE anchor = :name AND term = :term AND service_id <> :me AND released = 0 AND ` + dbclock.Live + `
  AND transfer_to IS NULL AND priority < :priority AND acquired <> 'operator'
  AND term_started_at + INTERVAL :tenure * 1000 MICROSECOND <= ` + dbclock.Now
}

// rowStmt is a statement on the election's row as a connection whose
// session commits runs it (the lock connection, whose session also bounds
// the lock waits; a pooled one in a transaction of the library's) and as a
// pooled connection runs it on its own: bounded (see stmt.Bound), and only
// on a session that commits it (commitsSQL; see floor.ExecCommitted).
type rowStmt struct{ conn, pool stmt.Stmt }

func newRowStmt(sql string, conn, pool stmt.Bound) rowStmt {
	return rowStmt{conn: conn.Stmt(sql), pool: pool.Stmt(sql + ` AND ` + commitsSQL)}
}

// fencedCond matches election :name's row while it names the candidate
// (:me) with the term :hold and a live lease, on a session whose time zone
// has no daylight saving time (dbclock.Trusted).
const fencedCond = `anchor = :name AND ` + probe.HoldsCond + `
  AND ` + dbclock.Live + ` AND ` + dbclock.Trusted

// fencedCheckSQL locks the election's row in share mode and matches it only
// under fencedCond. The share lock makes any takeover (which must update the
// row) wait until the transaction ends. LOCK IN SHARE MODE works on MySQL 8
// and MariaDB alike.
func fencedCheckSQL(tbl string) string {
	return `SELECT 1 FROM ` + tbl + ` WHERE ` + fencedCond + ` LOCK IN SHARE MODE`
}

// fencedWriteSQL is the check on a certification-based cluster (Galera,
// Group Replication multi-primary), where a share lock is local to one node
// and not part of the transaction's write set: it writes the election's row
// under the same conditions, so that the fenced transaction and any takeover
// (which writes the row too) conflict in certification and one of them
// aborts. It always changes the row (last_seen_active strictly increases),
// so it reports 1 affected row when it matched, with or without
// CLIENT_FOUND_ROWS, and the row is in the write set. Moving
// last_seen_active forward extends the lease by the database clock only:
// the leader's own deadline is unchanged, so this is never unsafe; it can
// delay a takeover after the leader's last fenced commit by up to one lease.
func fencedWriteSQL(tbl string) string {
	return `UPDATE ` + tbl + ` SET last_seen_active = GREATEST(last_seen_active + INTERVAL 1 MICROSECOND, ` + dbclock.Now + `)
WHERE ` + fencedCond
}

// ---- The table backend ----

// tableStmts are the table backend's statements, compiled by tableStatements;
// they take their arguments from tableBackend.params.
type tableStmts struct {
	heartbeat stmt.Stmt   // renews, takes or inserts the row, in the term floor's transaction (probe.HeartbeatSQL)
	renew     stmt.Stmt   // a holder's renewal, outside that transaction (see tableStatements)
	peek      string      // no row, but fails unless the table has the columns
	floor     floor.Stmts // the election's term floor (internal/floor)
}

// tableStatements returns the table backend's statements on election table
// table, every one that can wait for a lock bounded by bound, for a
// candidate whose lock delay is lockDelay.
func tableStatements(table string, bound stmt.Bound, lockDelay time.Duration) tableStmts {
	tbl := quoteTable(table)
	s := tableStmts{
		heartbeat: bound.Stmt(probe.HeartbeatSQL(tbl)),
		// No row, but fails unless the table has the columns (decision:
		// schema version 7).
		peek:  `SELECT ` + probe.RecordColumns + `, decision FROM ` + tbl + ` WHERE 1 = 0`,
		floor: floor.NewStmts(table, bound, lockDelay),
	}
	// A holder's renewal: the heartbeat's R branch alone, as an UPDATE
	// that assigns no term, so that it runs outside the term floor's
	// transaction, in one round trip. It changes the row (1 affected row,
	// or matched under CLIENT_FOUND_ROWS) exactly when the heartbeat would
	// renew it (probe.RenewCond, on a session whose time zone has no
	// daylight saving time), with the same assignments; otherwise it
	// changes nothing and the heartbeat decides (a take, a request, an
	// unsafe session, …).
	s.renew = bound.Stmt(`UPDATE ` + tbl + ` SET value = :value, backend = 'table', connection_id = NULL, transfer_to = NULL,
  released = 0, lease_ms = :lease, last_seen_active = ` + dbclock.Now + `, priority = :priority
WHERE anchor = :name AND ` + probe.RenewCond + ` AND ` + dbclock.Trusted + ` AND ` + commitsSQL)
	return s
}

// readCommitted sets the isolation of a Batcher's renewals' and give-ups'
// transaction (heldtx.Tx's Setup). The UPDATE may scan the whole primary
// key (the optimizer's choice when the batch is a large part of the
// table); under REPEATABLE READ it would then wait for every row another
// transaction has locked, stalling all the batch's elections for one
// operator's lock. Under READ COMMITTED InnoDB skips a locked row that
// does not match the WHERE (semi-consistent read). SET TRANSACTION without
// SESSION sets it for the next transaction only, on MySQL and MariaDB
// alike.
const readCommitted = `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`

// batchStmts are a Batcher's statements on many elections' rows (:names).
type batchStmts struct {
	// lock locks the rows a batch of renewals may renew; renew renews
	// them (Batcher.execRenew); read reads rows (Batcher.execRead), once
	// bounded for the server. Each has one list of elections, :names,
	// which stmt.In fills. floors counts the floor rows of a batch of
	// takes (Batcher.execTake).
	lock, renew, read, floors string
	// giveLock locks the rows a batch of give-ups may give up (as lock),
	// give gives them up, as each rowWrite does, and giveEnd ends their
	// terms (:terms) in the history (Batcher.execGive).
	giveLock string
	give     [writeHandOver + 1]stmt.Stmt
	giveEnd  stmt.Stmt
	// bound bounds the session of a batch of renewals or give-ups (idle
	// time and lock waits) before its transaction; restore puts back what
	// it had.
	bound, restore string
	// takeLock locks and reads the rows of a set-based batch of takes
	// before their heartbeats, heartbeats is those heartbeats, one
	// candidate's (probe.HeartbeatAllSQL), and takeRead reads the rows
	// after them, only on a session whose clock is trusted
	// (internal/takeset).
	takeLock, takeRead, heartbeats string
	table                          string // the election table (for errors)
}

// boundStmts are a Batcher's statements that may wait for a lock, bounded
// for the server (stmt.Bound) once it is known (Batcher.bounded).
type boundStmts struct {
	read string
	take takeset.Stmts
}

// bounded returns s's statements that may wait for a lock, bounded by b.
func (s batchStmts) bounded(b stmt.Bound) *boundStmts {
	return &boundStmts{read: b.Wrap(s.read), take: takeset.Stmts{Table: s.table, Floors: s.floors, Lock: b.Wrap(s.takeLock), Read: b.Wrap(s.takeRead), Heartbeats: b.Stmt(s.heartbeats)}}
}

// batchStatements returns a Batcher's statements on table table,
// whose session lock waits end after queryTimeout.
func batchStatements(table string, queryTimeout time.Duration) batchStmts {
	s := batchStmts{table: table}
	tbl := quoteTable(table)
	s.floors = `SELECT COUNT(*) FROM ` + quoteTable(floor.Table(table)) + ` WHERE anchor IN (:names)`
	// A row with transfer_to set is left to its election's own heartbeat,
	// which acts on the request (or clears one naming the holder).
	s.lock = `SELECT anchor, service_id, term FROM ` + tbl +
		` WHERE anchor IN (:names) AND released = 0 AND transfer_to IS NULL AND ` + dbclock.Trusted + ` FOR UPDATE SKIP LOCKED`
	// FORCE INDEX (PRIMARY): from about 40 names the optimizer scans the
	// whole primary key instead, and MariaDB 11.6.2+
	// (innodb_snapshot_isolation ON) no longer skips a row locked by
	// another transaction under READ COMMITTED: the batch would wait for an
	// operator's lock on an unrelated row.
	s.renew = `UPDATE ` + tbl + ` FORCE INDEX (PRIMARY) SET last_seen_active = ` + dbclock.Now + ` WHERE anchor IN (:names)`
	s.read = `SELECT ` + probe.RecordColumns + ` FROM ` + tbl + ` WHERE anchor IN (:names)`
	// Every column but the decision (always NULL), as takeset.Stmts says.
	const takeCols = `anchor, service_id, term, acquired, released <> 0, transfer_to IS NOT NULL,
  term_started_at, last_seen_active, lease_ms, released, value, backend, connection_id, transfer_to, priority`
	s.takeLock = `SELECT ` + takeCols + ` FROM ` + tbl + ` FORCE INDEX (PRIMARY) WHERE anchor IN (:names) FOR UPDATE`
	// A locking read, as the first: the rows as they are, which a plain
	// read may not see (the snapshot of the transaction's first plain
	// read, the floor's sum, under REPEATABLE READ). The batch holds
	// their locks already.
	s.takeRead = `SELECT ` + takeCols + ` FROM ` + tbl + ` FORCE INDEX (PRIMARY) WHERE anchor IN (:names) AND ` + dbclock.Trusted + ` FOR UPDATE`
	s.heartbeats = probe.HeartbeatAllSQL(tbl)
	s.giveLock = `SELECT anchor, service_id, term FROM ` + tbl + ` FORCE INDEX (PRIMARY) WHERE anchor IN (:names) AND released = 0 AND ` + dbclock.Trusted + ` FOR UPDATE SKIP LOCKED`
	for w, sets := range giveSets() {
		s.give[w] = stmt.Must(`UPDATE ` + tbl + ` FORCE INDEX (PRIMARY) SET ` + sets + ` WHERE anchor IN (:names)`)
	}
	s.giveEnd = stmt.Must(`UPDATE ` + quoteTable(floor.History(table)) + ` FORCE INDEX (open_terms) SET ` + endSets + `
WHERE anchor IN (:names) AND term = CASE anchor :terms END AND ended_at IS NULL AND ` + dbclock.Trusted)

	n := stmt.WaitSecs(queryTimeout)
	s.bound, s.restore = stmt.SessionSQL(true, stmt.SessionVar{Name: "wait_timeout", Value: n},
		stmt.SessionVar{Name: "innodb_lock_wait_timeout", Value: n}, stmt.SessionVar{Name: "lock_wait_timeout", Value: n})
	return s
}

// ---- The lock backend ----

// lockStmts are the lock backend's statements, compiled once by prepare;
// they take their values from lockBackend.params. The lock name is in
// their text (see getlock.Name and ValidateName); the values go in as
// stmt.Bind writes them, so each is one round trip.
type lockStmts struct {
	session stmt.Stmt // the lock connection's session limits
	read    stmt.Stmt // the election's row
	pass    stmt.Stmt // waits lockWait for the lock's holder to let go (getlock.Lock.Pass)

	// The statements that assign a term, run in one transaction with the
	// term floor (see lockBackend.write): :floor and :insert come from it.
	take        stmt.Stmt // takes the row read with term :term as :acquired, unless it changed since
	insert      stmt.Stmt // writes a new row naming this candidate
	placeholder stmt.Stmt // a new row naming this candidate but no lock connection (see lockBackend.watch)
	// floor are the statements on the election's term floor row, run on
	// the lock connection (whose session bounds their lock waits).
	floor floor.Stmts

	// renew renews the row where it still names this candidate's term
	// :hold.
	renew stmt.Stmt
}

// lockStatements returns the lock backend's statements on election name's
// row of election table table, for lock, waiting lockWait in pass.
func lockStatements(table, name string, lock getlock.Lock, lockWait, lockDelay time.Duration) lockStmts {
	tbl, anchor := quoteTable(table), getlock.Literal(name)
	s := lockStmts{
		read: stmt.Must(`SELECT ` + probe.RecordColumns + ` FROM ` + tbl + ` WHERE anchor = ` + anchor),
		pass: lock.Pass(lockWait),
		// The term a take or insert wrote, when its OK packet lacks it.
	}
	// Taking an existing row: only if it is still the row that was read
	// (an operator may write between the read and the take). The new term
	// comes back through LAST_INSERT_ID, in the same round trip.
	// Every new term is above the election's term floor (dbclock.TermNew).
	s.take = stmt.Must(`UPDATE ` + tbl + ` SET service_id = :me,
  term = LAST_INSERT_ID(GREATEST(term + 1, ` + dbclock.TermNew + `)),
  term_started_at = ` + dbclock.Now + `, last_seen_active = ` + dbclock.Now + `, lease_ms = :lease, released = 0,
  acquired = :acquired, value = :value, backend = 'lock', connection_id = CONNECTION_ID(), transfer_to = NULL, priority = :priority
WHERE anchor = :name AND term = :term`)
	// last_seen_active after term_started_at, as in the table backend's
	// insert (SYSDATE(6) is read at each call).
	s.insert = stmt.Must(`INSERT INTO ` + tbl + ` (anchor, service_id, term, term_started_at, last_seen_active,
  lease_ms, released, acquired, value, backend, connection_id, priority)
VALUES (:name, :me, LAST_INSERT_ID(` + dbclock.TermNew + `), ` + dbclock.Now + `, ` + dbclock.Now + `, :lease, 0, :insert, :value, 'lock', CONNECTION_ID(), :priority)`)
	s.placeholder = stmt.Must(`INSERT INTO ` + tbl + ` (anchor, service_id, last_seen_active, term, term_started_at,
  lease_ms, released, acquired, value, backend, connection_id, priority)
VALUES (:name, :me, NOW(6), LAST_INSERT_ID(` + dbclock.TermNew + `), NOW(6), :lease, 0, :insert, '', 'lock', NULL, :priority)`)
	s.floor = floor.NewStmts(table, stmt.Bound{}, lockDelay)

	// The renewal does not test IS_USED_LOCK itself: that function is
	// unsafe for statement-based replication (a replica would evaluate it
	// and skip the update). keepLock checks the lock first on the same
	// connection; the lock can only be lost in between with the
	// connection, and then this statement fails too.
	// A renewal fails while an operator asks this holder to hand over
	// (transfer_to set, but not to itself: that asks nothing, and the
	// renewal clears it); renewLost then reads the request.
	s.renew = stmt.Must(`UPDATE ` + tbl + ` SET last_seen_active = ` + dbclock.Now + `, lease_ms = :lease, value = :value,
  backend = 'lock', connection_id = CONNECTION_ID(), transfer_to = NULL, priority = :priority
WHERE anchor = :name AND service_id = :me AND term = :hold AND released = 0
  AND (transfer_to IS NULL OR transfer_to = service_id)`)
	return s
}

// lockSessionSQL gives the lock connection's session its limits: the
// server drops it after secs of silence, and its lock waits end with the
// client's QueryTimeout, wait seconds (see stmt.Bound): a statement the
// client gave up on does not keep the server thread waiting for a row or
// metadata lock. The connection comes from the caller's pool with whatever
// session state the application left on it: its clock (timestamp), time
// zone and commit mode are set here, since sqlelect does not trust session
// state it did not set. The connection never goes back to the pool.
func lockSessionSQL(secs, wait int64) stmt.Stmt {
	session, _ := stmt.SessionSQL(false, stmt.SessionVar{Name: "wait_timeout", Value: secs}, stmt.SessionVar{Name: "interactive_timeout", Value: secs},
		stmt.SessionVar{Name: "innodb_lock_wait_timeout", Value: wait}, stmt.SessionVar{Name: "lock_wait_timeout", Value: wait},
		stmt.SessionVar{Name: "timestamp", Value: "DEFAULT"}, stmt.SessionVar{Name: "time_zone", Value: "'+00:00'"},
		stmt.SessionVar{Name: "autocommit", Value: 1}, stmt.SessionVar{Name: "completion_type", Value: "'NO_CHAIN'"})
	return stmt.Must(session)
}
