package schema

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/migrations"
)

// lockWait is how long Lock waits for golang-migrate's lock (GET_LOCK), as
// golang-migrate's mysql driver does.
const lockWait = 10 * time.Second

// session is one Migrator call: a connection of the caller's pool, held
// for the call, and golang-migrate's database.Driver on it. It does what
// golang-migrate's mysql driver does, with the same version table and lock
// (they exclude each other), but every statement runs under the call's
// ctx, which golang-migrate's Driver interface cannot pass (hence the
// field), and a migration file's statements run one at a time on the
// connection, so the caller's DSN needs no multiStatements=true.
type session struct {
	ctx    context.Context
	conn   *sql.Conn
	lockID string
	locked atomic.Bool // GET_LOCK held: the connection is closed, not pooled, if the call ends so
}

// run runs f in a session on a connection of db, with golang-migrate's
// Migrate on it, and gives the connection back.
func run(ctx context.Context, db *sql.DB, f func(s *session, m *migrate.Migrate) error) (err error) {
	defer func() { err = wrap(ctx, err) }()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	s := &session{ctx: ctx, conn: conn}
	defer func() { err = errors.Join(err, s.close()) }()
	if err := s.start(); err != nil {
		return err
	}
	// Neither fails: the files are embedded (iofs.New fails only on a file
	// system it cannot read or on two files of a version), and
	// NewWithInstance only stores its arguments.
	src, _ := iofs.New(migrations.FS(), ".")
	m, _ := migrate.NewWithInstance("iofs", src, "mysql", s)
	// Lock is bounded by lockWait and ctx: golang-migrate's own timeout
	// would leave it running after the call.
	m.LockTimeout = time.Hour
	return f(s, m)
}

// wrap prefixes the errors of golang-migrate and of the driver (the
// session's have the prefix already, and ErrNoChange stays as it is), and
// makes err wrap ctx's error when ctx ended: the driver may report the
// connection it closed instead.
func wrap(ctx context.Context, err error) error {
	if err != nil && !errors.Is(err, migrate.ErrNoChange) && !strings.HasPrefix(err.Error(), "schema: ") {
		err = fmt.Errorf("schema: %w", err)
	}
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, ctx.Err())
}

// start names the lock and creates the version table if it is missing.
func (s *session) start() error {
	var name sql.NullString
	var n int
	var limit uint64
	// LIMIT 1: the row, whatever the session's sql_select_limit (which a
	// statement's own LIMIT overrides).
	err := s.conn.QueryRowContext(s.ctx, `SELECT DATABASE(), (SELECT COUNT(*) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?), @@SESSION.sql_select_limit LIMIT 1`, MigrationsTable).Scan(&name, &n, &limit)
	switch {
	case err != nil:
		return err
	case name.String == "":
		return errors.New("schema: the connection has no current database: name one in the DSN (…/DBNAME)")
	case limit < probe.MinSelectLimit: // as Run's preflight
		// The reads of the table's columns and rows would miss some.
		return fmt.Errorf("schema: the session's sql_select_limit is %d, which cuts reads short: remove it from the DSN, or set sql_select_limit=DEFAULT there", limit)
	}
	s.lockID, _ = database.GenerateAdvisoryLockId(name.String + ":" + MigrationsTable) // never fails
	if n == 0 {
		_, err = s.conn.ExecContext(s.ctx, "CREATE TABLE IF NOT EXISTS `"+MigrationsTable+"` (version bigint not null primary key, dirty boolean not null)")
	}
	if err != nil {
		return fmt.Errorf("schema: creating %s: %w", MigrationsTable, err)
	}
	return nil
}

// close gives the connection back to the pool, or closes it when it may
// still hold the lock.
func (s *session) close() error {
	if s.locked.Load() {
		_ = s.conn.Raw(func(any) error { return driver.ErrBadConn }) // returns that error, having closed it
		return nil
	}
	return s.conn.Close()
}

// Lock takes the lock golang-migrate's mysql driver takes.
func (s *session) Lock() error {
	var ok sql.NullBool
	err := s.conn.QueryRowContext(s.ctx, "SELECT GET_LOCK(?, ?)", s.lockID, int(lockWait.Seconds())).Scan(&ok)
	switch {
	case err != nil:
		return fmt.Errorf("schema: taking the migration lock: %w", err)
	case !ok.Bool:
		return fmt.Errorf("schema: %w: another migration held the lock for %v", migrate.ErrLocked, lockWait)
	}
	s.locked.Store(true)
	return nil
}

// Unlock releases the lock.
func (s *session) Unlock() error {
	if _, err := s.conn.ExecContext(s.ctx, "SELECT RELEASE_LOCK(?)", s.lockID); err != nil {
		return fmt.Errorf("schema: releasing the migration lock: %w", err)
	}
	s.locked.Store(false)
	return nil
}

// withLock runs f holding the lock.
func (s *session) withLock(f func() error) error {
	if err := s.Lock(); err != nil {
		return err
	}
	return errors.Join(f(), s.Unlock())
}

// Run runs a migration file's statements one by one.
func (s *session) Run(r io.Reader) error {
	script, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	for i, q := range statements(string(script)) {
		if _, err := s.conn.ExecContext(s.ctx, q); err != nil {
			return fmt.Errorf("schema: migration failed at its statement %d: %w", i+1, err)
		}
	}
	return nil
}

// SetVersion records version, as golang-migrate's mysql driver does.
func (s *session) SetVersion(version int, dirty bool) error {
	tx, err := s.conn.BeginTx(s.ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err == nil {
		defer tx.Rollback() //nolint:errcheck // after Commit, or after the error returned
		_, err = tx.ExecContext(s.ctx, "DELETE FROM `"+MigrationsTable+"` LIMIT 1")
	}
	if err == nil && (version >= 0 || version == database.NilVersion && dirty) {
		_, err = tx.ExecContext(s.ctx, "INSERT INTO `"+MigrationsTable+"` (version, dirty) VALUES (?, ?)", version, dirty)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return fmt.Errorf("schema: recording the version: %w", err)
	}
	return nil
}

// Version reads the recorded version; database.NilVersion for none.
func (s *session) Version() (version int, dirty bool, err error) {
	err = s.conn.QueryRowContext(s.ctx, "SELECT version, dirty FROM `"+MigrationsTable+"` LIMIT 1").Scan(&version, &dirty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return database.NilVersion, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("schema: reading the version: %w", err)
	}
	return version, dirty, nil
}

// Open, Close and Drop complete database.Driver; Migrator does not call them.
func (s *session) Open(string) (database.Driver, error) { return nil, errors.ErrUnsupported }
func (s *session) Close() error                         { return nil }
func (s *session) Drop() error                          { return errors.ErrUnsupported }

// statements splits a migration file into its statements, as the files are
// laid out (TestStatementsOfMigrations holds every file to it): a statement
// ends with a line that ends with a semicolon, and a line that begins with
// "--" is a comment, whatever it holds. So a semicolon within a line, in a
// string or a comment, ends nothing. What holds no code (blank lines,
// comments, a lone semicolon) is dropped.
func statements(script string) []string {
	var out, lines []string
	code := false
	// The ";" line added ends the last statement when no semicolon does.
	for _, line := range strings.Split(script+"\n;", "\n") {
		text := strings.TrimSpace(line)
		comment := strings.HasPrefix(text, "--")
		lines = append(lines, line)
		code = code || !comment && strings.TrimSuffix(text, ";") != ""
		if !comment && strings.HasSuffix(text, ";") {
			if code {
				q := strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";")
				out = append(out, strings.TrimSpace(q))
			}
			lines, code = nil, false
		}
	}
	return out
}
