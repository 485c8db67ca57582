package election

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// NewLock returns a candidate of the GET_LOCK backend: the election is the
// MySQL user-level lock LockName(database, cfg.Table, cfg.Name), database
// being the table's (its qualifier, else the connection's default database,
// read by Run), held on a connection dedicated to this candidate, and the holder publishes who it is in the same table row as
// the table backend, so that Leader, Status, the CLI and plain SQL answer "who
// leads" the same way for both backends (with backend = 'lock' and the
// holder's connection_id).
//
// How it works:
//
//   - The candidate takes one connection from db (db.Conn) and keeps it for
//     the whole campaign. It never goes back to the pool: when the campaign
//     ends, or after any error on it, it is closed (which also frees a lock
//     it held), and a fresh one is taken next time. db must therefore allow
//     one more open connection per running candidate (SetMaxOpenConns).
//   - The connection's session wait_timeout (and interactive_timeout) is set
//     to the lease rounded up to whole seconds, so the server itself drops a
//     holder that stops talking (hung process, network partition) and frees
//     the lock. The TCP keepalive variables are tried too where the server
//     lets a session set them.
//   - Waiting candidates block in GET_LOCK with a timeout of
//     min(RetryInterval, QueryTimeout/2), reading the row after each wait, so
//     they keep observing who leads and wake as soon as the lock is freed.
//   - A candidate that gets the lock reads the row and takes it (a new term,
//     its id, value and connection id) unless it names another candidate
//     with a live lease that no lock holder wrote (an operator's REPLACE):
//     then it lets the lock go for the named candidate. A row that was
//     released or has expired by the database clock is taken with no lock
//     delay. A live row written by a lock holder whose connection is gone
//     (killed, crashed, dropped by wait_timeout) is taken with a lock delay of
//     what was left of its lease (at most LockDelay): the old holder stands
//     down by its own clock RenewDeadline after its last renewal, before its
//     lease ends. A new row (there was none) waits out LockDelay.
//   - The holder checks every RenewInterval that its connection still holds
//     the lock (IS_USED_LOCK(name) = CONNECTION_ID()) and then renews the row
//     (last_seen_active, lease, value) where it still names it with its
//     term. If the lock connection fails, it tries once on a fresh
//     connection: it keeps its term only if it gets the lock back at once
//     and the row is unchanged. Like the table backend it stands down by its
//     monotonic clock when no renewal succeeded within RenewDeadline.
//   - Resign (and the end of Run) marks the row released and releases the
//     lock, so a waiting candidate takes over within milliseconds.
//   - A transfer (Transfer, or an operator's request that the renewal finds:
//     it fails while transfer_to is set) stands the holder down, marks the
//     row released and reserved for the target, and releases the lock.
//     Whichever waiter GET_LOCK wakes reads the row: the target takes it
//     (acquired = 'transferred', no lock delay); any other lets the lock go
//     again at once and looks again when the transfer window ends, so the
//     lock reaches the target within a few round trips, and the row is never
//     taken by another candidate during the window.
//
// Operator actions mean the same as on the table backend:
//
//   - Force-assume (Assume, or REPLACE INTO service_election ... naming id):
//     the holder's next renewal finds its term gone, so it stands down, sees
//     the operator's row naming another candidate and releases the lock.
//     Candidates that get the lock let it go again while the row names
//     someone else; the named candidate takes the row with a new term and
//     leads after its LockDelay. If it never comes, the row expires after
//     its lease and the election goes on.
//   - Force re-election (Reelect, or DELETE FROM service_election WHERE
//     anchor = ...): the holder's next renewal finds no row; it stands down,
//     writes a new row naming itself and marks it released at once, releases
//     the lock and sits out two retry intervals, so another candidate wins
//     (without a lock delay: the old holder stood down before releasing).
//
// An operator sees which connection holds the lock with
// SELECT IS_USED_LOCK(name), name being LockName's (for example
// 'sqlelect:app.service_election:jobs'); the row's connection_id says the
// same.
//
// All candidates of one election must use the same backend, and versions
// that name the lock alike (see LockName: a rolling upgrade that mixes lock
// namings makes leadership flap). Topologies where
// GET_LOCK is not cluster-wide are refused by Run with an error wrapping
// ErrUnsupportedTopology: a Galera cluster (MariaDB Galera, Percona XtraDB
// Cluster: wsrep_on or a wsrep provider) and MySQL Group Replication in
// multi-primary mode. Use NewTable there.
//
// db is the caller's: the library never opens or closes it. cfg is copied,
// defaults filled in and validated; errors wrap ErrInvalidConfig. NewLock does
// no I/O: Run checks the table and the topology first.
func NewLock(db *sql.DB, cfg Config) (Election, error) {
	if db == nil {
		return nil, ErrNilDB
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Batcher != nil {
		return nil, fmt.Errorf("%w: the lock backend cannot use a Batcher (each candidate needs its own connection)", ErrInvalidConfig)
	}
	b := &lockBackend{
		db:    db,
		sdb:   sqlx.NewDb(db, "mysql"),
		cfg:   cfg,
		log:   cfg.Logger.With("election", cfg.Name, "id", cfg.ID, "backend", "lock"),
		value: cfg.Value,
	}
	b.prepare()
	c := newCandidate(cfg, b)
	c.db = db
	return c, nil
}

// Lock names.
const (
	// MaxLockNameLen is the longest user-level lock name MySQL accepts.
	MaxLockNameLen = 64
	lockPrefix     = "sqlelect:"
	lockHashPrefix = "sqlelect#" // '#' never occurs in an election name
)

// LockName returns the GET_LOCK name of the lock backend's election name in
// table of database. User-level locks are server-wide, so the name includes
// the database and the table: the same election name in two databases or
// two tables of one server is two elections, and must be two locks. table
// may be qualified (`db.table`): its qualifier is then the database, and
// database is ignored; an empty table means DefaultTable. Pass the names as
// the server compares them (lower case where lower_case_table_names is 1 or
// 2: Run folds them so).
//
// The name is "sqlelect:" database "." table ":" name when that fits MySQL's
// 64 characters, database and table have only lower-case letters, digits, _
// and $, and name has no upper-case letters; otherwise "sqlelect#" followed
// by the first 55 hex digits of the SHA-256 of the three. Hashing keeps
// distinct elections distinct: they are never truncated into one, and
// MySQL, which folds lock names to lower case (MariaDB does not), never sees
// two names that differ only by case. The two forms cannot collide ('#' is
// not allowed in names), nor can two readable ones ('.' and ':' are not
// allowed in the database and table parts).
//
// An operator can see who holds it with, for example,
// SELECT IS_USED_LOCK('sqlelect:app.service_election:jobs') (a connection
// id, or NULL).
//
// Lock names changed in this version (they used to be "sqlelect:" name):
// all candidates of one election must run versions that name the lock
// alike. During a rolling upgrade that mixes both, an old and a new
// candidate can each hold its own lock, and they take the row from each
// other at every renewal: the terms and the lock delay still keep them from
// leading at once, but leadership flaps until every candidate runs one
// naming. Upgrade all candidates of an election together (stop the old ones
// first).
func LockName(database, table, name string) string {
	database, table = lockScope(database, table)
	plain := lockPrefix + database + "." + table + ":" + name
	if len(plain) <= MaxLockNameLen && plainIdent(database) && plainIdent(table) && plainLockName(name) {
		return plain
	}
	sum := sha256.Sum256([]byte(database + "\x00" + table + "\x00" + name))
	return (lockHashPrefix + hex.EncodeToString(sum[:]))[:MaxLockNameLen]
}

// lockScope splits a qualified table into its database and table, and
// fills in DefaultTable.
func lockScope(database, table string) (string, string) {
	if table == "" {
		table = DefaultTable
	}
	if db, t, ok := strings.Cut(table, "."); ok {
		database, table = db, t
	}
	return database, table
}

// plainIdent reports whether a database or table name may be used as it is
// in a lock name: not empty, and only lower-case letters, digits, _ and $.
func plainIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '$') {
			return false
		}
	}
	return true
}

// lockDatabase returns the database and the table an election's lock names
// are made of (see LockName): table's qualifier, else the connection's
// default database (DATABASE(); empty when there is none, and then the
// election's statements fail anyway). Where the server compares database
// and table names without case (lower_case_table_names 1 or 2), both are
// folded to lower case, so that candidates that spell them differently
// still share the lock.
func lockDatabase(ctx context.Context, db *sql.DB, table string) (database, tbl string, err error) {
	var cur sql.NullString
	var fold int
	if err := db.QueryRowContext(ctx, `SELECT DATABASE(), @@lower_case_table_names`).Scan(&cur, &fold); err != nil {
		return "", "", fmt.Errorf("election: reading the default database: %w", err)
	}
	database, tbl = lockScope(cur.String, table)
	if fold != 0 {
		database, tbl = strings.ToLower(database), strings.ToLower(tbl)
	}
	return database, tbl, nil
}

// plainLockName reports whether name may be used as it is in a lock name:
// not empty, and only lower-case letters, digits and . _ : / @ -, so that it
// is the same for every server and safe inside a SQL string literal.
func plainLockName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("._:/@-", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// lockBackend is the GET_LOCK backend. Every method but leader is called from
// the Run goroutine only, so the connection state needs no mutex.
type lockBackend struct {
	db   *sql.DB
	sdb  *sqlx.DB
	cfg  Config
	lock string // LockName(database, cfg.Table, cfg.Name), set by preflight
	log  *slog.Logger

	waitTimeout time.Duration // the lock connection's wait_timeout
	lockWait    time.Duration // how long a follower blocks in GET_LOCK

	// The lock connection, nil when none is open.
	conn     *sqlx.Conn
	connID   uint64    // its CONNECTION_ID()
	locked   bool      // it holds the lock (once: GET_LOCK is re-entrant)
	wrote    uint64    // the term it last wrote naming this candidate
	lastUsed time.Time // end of its last statement, for the idle limit

	noKeepalive bool // the server refused the session keepalive variables

	// value is the value the candidate publishes: cfg.Value until Proclaim
	// changes it (see setValue).
	value string

	// bound limits lock waits of statements on pooled connections (the
	// lock connection's session has the same limits); set by preflight.
	bound atomicBound

	sessionSQL, getLockSQL, tryLockSQL, isMineSQL, releaseLockSQL string
	readSQL, takeSQL, insertSQL, renewSQL, releaseSQL, peekSQL    string
	handOffSQL, handOverSQL, proclaimSQL                          string
}

// sqlString quotes s, which holds only characters safe in a SQL string
// literal (lock names, validated election names: no quotes, no
// backslashes), as a SQL string.
func sqlString(s string) string { return "'" + s + "'" }

// prepare builds the statements once. The lock name and the election name
// are safe literals (see plainLockName and ValidateName), so statements that
// need nothing else go over the text protocol in one round trip.
func (b *lockBackend) prepare() {
	secs := int64(math.Ceil(b.cfg.LeaseDuration.Seconds()))
	secs = max(secs, 1)
	b.waitTimeout = time.Duration(secs) * time.Second
	b.lockWait = min(b.cfg.RetryInterval, b.cfg.QueryTimeout/2)

	tbl, anchor, lock := quoteTable(b.cfg.Table), sqlString(b.cfg.Name), sqlString(b.lock)
	// The session's lock waits end with the client's QueryTimeout (see
	// lockBound): a statement the client gave up on does not keep the
	// server thread waiting for a row or metadata lock.
	wait := lockWaitSecs(b.cfg.QueryTimeout)
	b.sessionSQL = fmt.Sprintf(`SET SESSION wait_timeout = %d, interactive_timeout = %d, innodb_lock_wait_timeout = %d, lock_wait_timeout = %d`,
		secs, secs, wait, wait)
	b.getLockSQL = fmt.Sprintf(`SELECT GET_LOCK(%s, %.6f)`, lock, b.lockWait.Seconds())
	b.tryLockSQL = `SELECT GET_LOCK(` + lock + `, 0)`
	b.isMineSQL = `SELECT IS_USED_LOCK(` + lock + `) = CONNECTION_ID()`
	b.releaseLockSQL = `SELECT RELEASE_LOCK(` + lock + `)`
	b.readSQL = `SELECT ` + recordColumns + ` FROM ` + tbl + ` WHERE anchor = ` + anchor
	b.peekSQL = `SELECT ` + recordColumns + ` FROM ` + tbl + ` WHERE 1 = 0`
	// Taking an existing row: only if it is still the row that was read
	// (an operator may write between the read and the take). The new term
	// comes back through LAST_INSERT_ID, in the same round trip.
	b.takeSQL = `UPDATE ` + tbl + ` SET service_id = ?,
  term = LAST_INSERT_ID(GREATEST(term + 1, ` + termNowSQL + `)),
  term_started_at = NOW(6), last_seen_active = NOW(6), lease_ms = ?, released = 0,
  acquired = ?, value = ?, backend = 'lock', connection_id = CONNECTION_ID(), transfer_to = NULL
WHERE anchor = ` + anchor + ` AND term = ?`
	b.insertSQL = `INSERT INTO ` + tbl + ` (anchor, service_id, last_seen_active, term, term_started_at,
  lease_ms, released, acquired, value, backend, connection_id)
VALUES (` + anchor + `, ?, NOW(6), LAST_INSERT_ID(` + termNowSQL + `), NOW(6), ?, 0, 'insert', ?, 'lock', CONNECTION_ID())`
	// The renewal does not test IS_USED_LOCK itself: that function is
	// unsafe for statement-based replication (a replica would evaluate it
	// and skip the update). isMineSQL runs first on the same connection;
	// the lock can only be lost in between with the connection, and then
	// this statement fails too.
	// A renewal fails while an operator asks this holder to hand over
	// (transfer_to set, but not to itself: that asks nothing, and the
	// renewal clears it); renewOnce then reads the request.
	b.renewSQL = `UPDATE ` + tbl + ` SET last_seen_active = NOW(6), lease_ms = ?, value = ?,
  backend = 'lock', connection_id = CONNECTION_ID(), transfer_to = NULL
WHERE anchor = ` + anchor + ` AND service_id = ? AND term = ? AND released = 0
  AND (transfer_to IS NULL OR transfer_to = service_id)`
	b.releaseSQL = `UPDATE ` + tbl + ` SET released = 1 WHERE anchor = ` + anchor + ` AND service_id = ? AND term = ? AND released = 0`
	b.handOffSQL = `UPDATE ` + tbl + ` SET ` + handOffSet + ` WHERE anchor = ` + anchor + ` AND service_id = ? AND term = ? AND released = 0`
	b.handOverSQL = `UPDATE ` + tbl + ` SET released = 1, transfer_to = NULLIF(?, ''), last_seen_active = NOW(6), lease_ms = ?
WHERE anchor = ` + anchor + ` AND service_id = ? AND term = ? AND released = 0`
	b.proclaimSQL = `UPDATE ` + tbl + ` SET value = ? WHERE anchor = ` + anchor + ` AND service_id = ? AND term = ? AND released = 0`
}

// MySQL and MariaDB error numbers specific to this backend.
const (
	erDupEntry              = 1062 // ER_DUP_ENTRY
	erUnknownSystemVariable = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	erGlobalVariable        = 1229 // ER_GLOBAL_VARIABLE
	erIncorrectGlobalLocal  = 1238 // ER_INCORRECT_GLOBAL_LOCAL_VAR (read only)
	erQueryTimeout          = 3024 // ER_QUERY_TIMEOUT (MySQL): MAX_EXECUTION_TIME exceeded
)

func mysqlErrno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func (b *lockBackend) preflight(ctx context.Context) error {
	if _, err := b.db.ExecContext(ctx, b.peekSQL); err != nil {
		return explainLayout(ctx, b.db, b.cfg.Table, classify(err, b.cfg.Table))
	}
	if err := checkTimeZone(ctx, b.db); err != nil {
		return err
	}
	database, table, err := lockDatabase(ctx, b.db, b.cfg.Table)
	if err != nil {
		return err
	}
	b.lock = LockName(database, table, b.cfg.Name)
	b.prepare() // the statements name the lock
	if err := checkLockTopology(ctx, b.db); err != nil {
		return err
	}
	var version string
	if err := b.db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return fmt.Errorf("election: reading the server version: %w", err)
	}
	b.bound.store(newLockBound(flavorOf(version), b.cfg.QueryTimeout))
	hint, call := getLockCall(sqlString(b.lock), b.lockWait, isMariaDB(version))
	b.getLockSQL = `SELECT ` + hint + call
	return nil
}

// isMariaDB reports whether a VERSION() string is MariaDB's.
func isMariaDB(version string) bool { return flavorOf(version) == flavorMariaDB }

// getLockCall returns a GET_LOCK call that waits about d for lock (a SQL
// expression), and the optimizer hint that must follow the SELECT keyword of
// its statement. MariaDB honours a fractional timeout. MySQL does not: it
// rounds the timeout to whole seconds (0.4 returns at once, 0.5 waits a
// second), so there the call waits whole seconds, rounded up, and
// MAX_EXECUTION_TIME ends the statement after d with error 3024 (see
// erQueryTimeout), leaving the connection usable. Either way a waiter queued
// in GET_LOCK gets the lock the moment it is released.
func getLockCall(lock string, d time.Duration, mariadb bool) (hint, call string) {
	if mariadb {
		return "", fmt.Sprintf("GET_LOCK(%s, %.6f)", lock, d.Seconds())
	}
	secs := max(int64((d+time.Second-1)/time.Second), 1)
	return fmt.Sprintf("/*+ MAX_EXECUTION_TIME(%d) */ ", max(d.Milliseconds(), 1)),
		fmt.Sprintf("GET_LOCK(%s, %d)", lock, secs)
}

// checkLockTopology refuses servers where GET_LOCK is not cluster-wide.
func checkLockTopology(ctx context.Context, db *sql.DB) error {
	refuse := func(why string) error {
		return fmt.Errorf("%w: %s: GET_LOCK is local to each node, so candidates connected to different nodes could all hold the lock; use the table backend (election.NewTable)",
			ErrUnsupportedTopology, why)
	}
	// variable reads a global variable; ok is false when the server has no
	// such variable (not that kind of server).
	variable := func(name string) (val string, ok bool, err error) {
		var v sql.NullString
		err = db.QueryRowContext(ctx, `SELECT @@global.`+name).Scan(&v)
		if mysqlErrno(err) == erUnknownSystemVariable {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("election: checking the topology (@@global.%s): %w", name, err)
		}
		return v.String, true, nil
	}
	on := func(v string) bool { return v == "1" || strings.EqualFold(v, "ON") }

	// Galera: MariaDB Galera Cluster, Percona XtraDB Cluster.
	v, ok, err := variable("wsrep_on")
	if err != nil {
		return err
	}
	if ok && on(v) {
		return refuse("the server is a Galera cluster node (wsrep_on=ON)")
	}
	v, ok, err = variable("wsrep_provider")
	if err != nil {
		return err
	}
	if ok && v != "" && !strings.EqualFold(v, "none") {
		return refuse(fmt.Sprintf("the server has a Galera provider loaded (wsrep_provider=%s)", v))
	}

	// MySQL Group Replication in multi-primary mode.
	v, ok, err = variable("group_replication_single_primary_mode")
	if err != nil {
		return err
	}
	if ok && !on(v) {
		var online int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM performance_schema.replication_group_members WHERE MEMBER_STATE = 'ONLINE'`).Scan(&online)
		var me *mysql.MySQLError
		switch {
		case errors.As(err, &me):
			return refuse(fmt.Sprintf("Group Replication is configured for multi-primary mode and its members cannot be read (%v)", err))
		case err != nil:
			return fmt.Errorf("election: checking the topology (Group Replication members): %w", err)
		case online > 0:
			return refuse("the server runs Group Replication in multi-primary mode")
		}
	}
	return nil
}

// ensureConn returns the lock connection, taking a fresh one from the pool
// when there is none. A connection that holds no lock and has been idle for
// half its wait_timeout is replaced first, before the server drops it.
func (b *lockBackend) ensureConn(ctx context.Context) (*sqlx.Conn, error) {
	if b.conn != nil && !b.locked && time.Since(b.lastUsed) > b.waitTimeout/2 {
		b.discard()
	}
	if b.conn != nil {
		return b.conn, nil
	}
	c, err := b.sdb.Connx(ctx)
	if err != nil {
		return nil, err
	}
	b.conn = c
	if _, err := c.ExecContext(ctx, b.sessionSQL); err != nil {
		return nil, b.fail(err)
	}
	if !b.noKeepalive {
		b.trySessionKeepalive(ctx, c)
	}
	var id uint64
	if err := c.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		return nil, b.fail(err)
	}
	b.connID = id
	b.lastUsed = time.Now()
	b.log.Debug("lock connection opened", "connection_id", id, "wait_timeout", b.waitTimeout)
	return c, nil
}

// trySessionKeepalive asks for TCP keepalive probes on the lock connection so
// that the server notices a vanished client while a statement runs, where a
// session may set them (MariaDB has them, global only in current versions;
// MySQL has none). Refusals are remembered and not retried.
func (b *lockBackend) trySessionKeepalive(ctx context.Context, c *sqlx.Conn) {
	secs := int64(b.waitTimeout / time.Second)
	for _, s := range []string{
		"SET SESSION tcp_keepalive_time = " + strconv.FormatInt(secs, 10),
		"SET SESSION tcp_keepalive_interval = 1",
		"SET SESSION tcp_keepalive_probes = 3",
	} {
		_, err := c.ExecContext(ctx, s)
		switch n := mysqlErrno(err); {
		case err == nil:
		case n == erUnknownSystemVariable || n == erGlobalVariable || n == erIncorrectGlobalLocal || n == erSpecificAccessDenied:
			b.noKeepalive = true
			return
		default:
			b.log.Debug("setting the session TCP keepalive failed", "err", err)
			b.noKeepalive = true
			return
		}
	}
}

// discard closes the lock connection without returning it to the pool
// (database/sql discards a connection whose Raw returns driver.ErrBadConn);
// the server frees any lock it held.
func (b *lockBackend) discard() {
	if b.conn == nil {
		return
	}
	_ = b.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = b.conn.Close()
	b.log.Debug("lock connection closed", "connection_id", b.connID, "held_lock", b.locked)
	b.conn, b.connID, b.locked, b.wrote = nil, 0, false, 0
}

// fail discards the lock connection after an error on it and returns the
// error classified.
func (b *lockBackend) fail(err error) error {
	b.discard()
	return classify(err, b.cfg.Table)
}

// touch records that the lock connection was just used.
func (b *lockBackend) touch() {
	if b.conn != nil {
		b.lastUsed = time.Now()
	}
}

// getLock runs a GET_LOCK statement: true when it got the lock. GET_LOCK
// returns NULL on an error (a killed thread, for one).
func (b *lockBackend) getLock(ctx context.Context, c *sqlx.Conn, query string) (bool, error) {
	var r sql.NullInt64
	err := c.QueryRowContext(ctx, query).Scan(&r)
	if mysqlErrno(err) == erQueryTimeout {
		// MySQL ended the wait (MAX_EXECUTION_TIME, see getLockCall).
		// Should that have raced with getting the lock, this connection
		// holds it: ask, so that the state here matches the server's.
		var mine sql.NullInt64
		if err := c.QueryRowContext(ctx, b.isMineSQL).Scan(&mine); err != nil {
			return false, err
		}
		r = sql.NullInt64{Int64: mine.Int64, Valid: true}
		err = nil
	}
	if err != nil {
		return false, err
	}
	if !r.Valid {
		return false, fmt.Errorf("election: GET_LOCK(%q) returned NULL", b.lock)
	}
	if r.Int64 == 1 {
		b.locked = true
	}
	return r.Int64 == 1, nil
}

// releaseLock releases the lock held by the lock connection.
func (b *lockBackend) releaseLock(ctx context.Context) error {
	if b.conn == nil || !b.locked {
		return nil
	}
	var r sql.NullInt64
	if err := b.conn.QueryRowContext(ctx, b.releaseLockSQL).Scan(&r); err != nil {
		return err
	}
	b.locked = false
	if !r.Valid || r.Int64 != 1 {
		b.log.Warn("RELEASE_LOCK found the lock not held by this connection", "lock", b.lock, "connection_id", b.connID)
	}
	return nil
}

// read reads the election's row on the lock connection; exists is false
// when there is none.
func (b *lockBackend) read(ctx context.Context, c *sqlx.Conn) (rec Record, exists bool, err error) {
	var row recordRow
	err = c.GetContext(ctx, &row, b.readSQL)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{Election: b.cfg.Name}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	return row.record(), true, nil
}

func (b *lockBackend) follow(ctx context.Context) (Record, beat, time.Duration, error) {
	defer b.touch()
	c, err := b.ensureConn(ctx)
	if err != nil {
		return Record{}, beat{}, 0, classify(err, b.cfg.Table)
	}
	if !b.locked {
		start := time.Now()
		got, err := b.getLock(ctx, c, b.getLockSQL)
		if err != nil {
			return Record{}, beat{}, 0, b.fail(err)
		}
		if !got {
			// Someone else holds the lock: report who leads, and block
			// in GET_LOCK again at once (but never spin, should the
			// server have ignored the timeout).
			rec, _, err := b.read(ctx, c)
			if err != nil {
				return Record{}, beat{}, 0, b.fail(err)
			}
			return rec, beat{}, max(b.lockWait-time.Since(start), 0), nil
		}
	}

	// This connection holds the lock: no other candidate of this election
	// can write the row until it is released; only operators can.
	rec, exists, err := b.read(ctx, c)
	if err != nil {
		return Record{}, beat{}, 0, b.fail(err)
	}
	if !exists {
		term, err := b.insert(ctx, c)
		if err != nil || term == 0 {
			return rec, beat{}, 0, err
		}
		// The previous holder may not know yet that the row was deleted.
		return rec, beat{held: true, term: term, delay: b.cfg.LockDelay}, 0, nil
	}
	me := b.cfg.ID
	var acquired string
	var delay time.Duration
	switch {
	case rec.reservedFor(me):
		// Handed to another candidate (a transfer), whose window is
		// open: let the lock go so that it can take over.
		return b.yieldLock(ctx, rec)
	case rec.Released && rec.Transfer && rec.TransferTo == me:
		acquired = "transferred"
	case rec.Released:
		acquired = "released"
	case rec.LeaseLeft <= 0:
		acquired = "expired"
	case rec.ID == me && rec.ConnectionID == b.connID && rec.Term == b.wrote:
		// This very connection wrote the row and held the lock since:
		// nobody else can have led, and this candidate stood down.
		acquired = "claimed"
	case rec.ConnectionID != 0:
		// A lock holder wrote it, and its connection no longer holds the
		// lock (killed, crashed, dropped). It stands down by its clock
		// before its lease ends.
		acquired, delay = "lock", min(rec.LeaseLeft, b.cfg.LockDelay)
		if rec.ID == me {
			acquired = "claimed"
		}
	case rec.ID == me:
		// An operator named this candidate; the previous holder may not
		// know yet.
		acquired, delay = "claimed", b.cfg.LockDelay
	default:
		// An operator named another candidate: let it take over.
		return b.yieldLock(ctx, rec)
	}
	res, err := c.ExecContext(ctx, b.takeSQL, me, b.cfg.leaseMillis(), acquired, b.value, rec.Term)
	if err != nil {
		return Record{}, beat{}, 0, b.fail(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Record{}, beat{}, 0, b.fail(err)
	}
	if n != 1 {
		return rec, beat{}, 0, nil // an operator wrote the row since: look again
	}
	term, err := b.newTerm(ctx, c, res)
	if err != nil {
		return Record{}, beat{}, 0, b.fail(err)
	}
	b.wrote = term
	return rec, beat{held: true, term: term, delay: delay}, 0, nil
}

// yieldLock lets the lock go so that the candidate rec names or reserves the
// row for can take over, and looks again when its lease (or transfer
// window) may run out.
func (b *lockBackend) yieldLock(ctx context.Context, rec Record) (Record, beat, time.Duration, error) {
	if err := b.releaseLock(ctx); err != nil {
		return Record{}, beat{}, 0, b.fail(err)
	}
	wait := jitter(b.cfg.RetryInterval, b.cfg.JitterFactor)
	return rec, beat{}, min(wait, rec.LeaseLeft+time.Millisecond), nil
}

// insert writes a new row naming this candidate and returns its term, or 0
// when an operator inserted one first.
func (b *lockBackend) insert(ctx context.Context, c *sqlx.Conn) (uint64, error) {
	res, err := c.ExecContext(ctx, b.insertSQL, b.cfg.ID, b.cfg.leaseMillis(), b.value)
	if mysqlErrno(err) == erDupEntry {
		return 0, nil
	}
	if err != nil {
		return 0, b.fail(err)
	}
	term, err := b.newTerm(ctx, c, res)
	if err != nil {
		return 0, b.fail(err)
	}
	b.wrote = term
	return term, nil
}

// newTerm returns the term a take or insert wrote: LAST_INSERT_ID(term) came
// back in the OK packet, else the row is read (nobody else writes it while
// this connection holds the lock but operators).
func (b *lockBackend) newTerm(ctx context.Context, c *sqlx.Conn, res sql.Result) (uint64, error) {
	if id, err := res.LastInsertId(); err == nil && id > 0 {
		return uint64(id), nil
	}
	var term uint64
	err := c.QueryRowContext(ctx, `SELECT LAST_INSERT_ID()`).Scan(&term)
	return term, err
}

func (b *lockBackend) renew(ctx context.Context, hold uint64) (beat, error) {
	defer b.touch()
	bt, err := b.renewOnce(ctx, hold)
	if err != nil && b.conn == nil && ctx.Err() == nil && !permanent(err) {
		// The lock connection failed (and was discarded): the lock may
		// have gone with it. Try once on a fresh connection, which keeps
		// the term only if it gets the lock back at once.
		b.log.Debug("lock connection failed while renewing; retrying on a fresh one", "term", hold, "err", err)
		bt, err = b.renewOnce(ctx, hold)
	}
	return bt, err
}

func (b *lockBackend) renewOnce(ctx context.Context, hold uint64) (beat, error) {
	c, err := b.ensureConn(ctx)
	if err != nil {
		return beat{}, classify(err, b.cfg.Table)
	}
	if !b.locked {
		got, err := b.getLock(ctx, c, b.tryLockSQL)
		if err != nil {
			return beat{}, b.fail(err)
		}
		if !got {
			b.log.Info("lock held by another connection", "term", hold)
			return beat{}, nil
		}
	} else {
		var mine sql.NullInt64
		if err := c.QueryRowContext(ctx, b.isMineSQL).Scan(&mine); err != nil {
			return beat{}, b.fail(err)
		}
		if !mine.Valid || mine.Int64 != 1 {
			b.log.Warn("lock lost while its connection lives", "term", hold, "connection_id", b.connID)
			b.locked = false
			return beat{}, nil
		}
	}
	res, err := c.ExecContext(ctx, b.renewSQL, b.cfg.leaseMillis(), b.value, b.cfg.ID, hold)
	if err != nil {
		return beat{}, b.fail(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return beat{}, b.fail(err)
	}
	if n == 1 {
		b.wrote = hold
		return beat{held: true, term: hold}, nil
	}
	// The row no longer names this term (replaced, released or deleted),
	// or an operator asked for a transfer or a step-down.
	rec, exists, err := b.read(ctx, c)
	if err != nil {
		return beat{}, b.fail(err)
	}
	if exists && rec.ID == b.cfg.ID && rec.Term == hold && !rec.Released && rec.Transfer {
		return beat{requested: true, to: rec.TransferTo}, nil
	}
	if exists {
		// Keep the lock: the next follow reads the row and either takes
		// it (it names this candidate) or lets the lock go.
		return beat{}, nil
	}
	// Deleted (a force re-election): write a row naming this candidate,
	// which the campaign marks released once it stood down, before the
	// lock is released; then a waiting candidate takes over at once.
	term, err := b.insert(ctx, c)
	if err != nil || term == 0 {
		return beat{}, err
	}
	return beat{held: true, term: term, inserted: true}, nil
}

func (b *lockBackend) release(ctx context.Context, hold uint64, unserved time.Duration) error {
	defer b.touch()
	// A row handed off with an unserved delay stays live, written by a
	// connection that no longer holds the lock: the next lock holder
	// waits out what is left of it (see follow).
	query, args := b.releaseSQL, []any{b.cfg.ID, hold}
	if unserved > 0 {
		query, args = b.handOffSQL, []any{ceilMillis(unserved), b.cfg.ID, hold}
	}
	return b.giveUp(ctx, query, args)
}

// handOver marks the row released and reserved for to (see
// tableBackend.handOver), then releases the lock: a waiter that is not to
// gets it, finds the row reserved and lets it go (see follow).
func (b *lockBackend) handOver(ctx context.Context, hold uint64, to string, window time.Duration) error {
	defer b.touch()
	return b.giveUp(ctx, b.handOverSQL, []any{to, ceilMillis(window), b.cfg.ID, hold})
}

// giveUp runs query, which ends the row's term hold, on the lock
// connection and then releases the lock; without a lock connection (it
// failed) it runs query on a pooled one.
func (b *lockBackend) giveUp(ctx context.Context, query string, args []any) error {
	if b.conn == nil {
		// The lock went with its connection; still say the term is over,
		// so that nobody waits for its lease (a no-op if it was taken).
		_, err := b.db.ExecContext(ctx, b.bound.load().wrap(query), args...)
		return classify(err, b.cfg.Table)
	}
	if _, err := b.conn.ExecContext(ctx, query, args...); err != nil {
		return b.fail(err)
	}
	if err := b.releaseLock(ctx); err != nil {
		return b.fail(err)
	}
	return nil
}

func (b *lockBackend) setValue(v string) { b.value = v }

func (b *lockBackend) proclaim(ctx context.Context, hold uint64) (bool, error) {
	defer b.touch()
	var res sql.Result
	var err error
	args := []any{b.value, b.cfg.ID, hold}
	if b.conn != nil {
		res, err = b.conn.ExecContext(ctx, b.proclaimSQL, args...)
		if err != nil {
			return false, b.fail(err)
		}
	} else if res, err = b.db.ExecContext(ctx, b.bound.load().wrap(b.proclaimSQL), args...); err != nil {
		return false, classify(err, b.cfg.Table)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (b *lockBackend) leader(ctx context.Context) (Record, error) {
	return readRecord(ctx, b.sdb, b.cfg.Table, b.cfg.Name)
}

func (b *lockBackend) close() {
	if b.conn == nil {
		return
	}
	if b.locked {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.QueryTimeout)
		if err := b.releaseLock(ctx); err != nil {
			b.log.Debug("RELEASE_LOCK failed; closing the connection frees the lock", "err", err)
		}
		cancel()
	}
	b.discard()
}
