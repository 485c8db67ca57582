package stmt

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqlerr"
)

// Flavor is the kind of server, as far as bounding a statement's lock
// waits goes.
type Flavor uint8

const (
	FlavorOther   Flavor = iota // unknown, or MySQL before 8.0: statements are left as they are
	FlavorMariaDB               // SET STATEMENT … FOR
	FlavorMySQL                 // MySQL 8.0.3 and later: SET_VAR optimizer hints
)

// Bound bounds how long one statement may wait, on the server, for a
// row lock (innodb_lock_wait_timeout) or a metadata lock
// (lock_wait_timeout). Without it a statement whose client gave up (its
// context ended: the driver closes the connection) keeps its server thread,
// and its connection slot, waiting up to innodb_lock_wait_timeout (50 s by
// default) for a lock someone holds, while the client retries on fresh
// connections: a row lock held for long enough fills max_connections.
//
// The zero value bounds nothing. A Bound is a small value, safe to copy
// and to share.
type Bound struct {
	Flavor Flavor
	Secs   int64 // the bound in whole seconds, at least 1
}

// NewBound bounds lock waits of a server of the given flavour to d,
// rounded down to whole seconds (the variables' unit) and at least 1 s:
// about the client's own timeout, so that the server gives up when the
// client does.
func NewBound(f Flavor, d time.Duration) Bound {
	return Bound{Flavor: f, Secs: WaitSecs(d)}
}

// WaitSecs is d in whole seconds, rounded down, at least 1.
func WaitSecs(d time.Duration) int64 {
	return max(int64(d/time.Second), 1)
}

// Wrap returns stmt so that its lock waits end after the bound:
//
//   - MariaDB: SET STATEMENT innodb_lock_wait_timeout=N,lock_wait_timeout=N FOR stmt
//   - MySQL 8.0.3+: optimizer hints right after the statement's first
//     keyword (SELECT, INSERT, REPLACE, UPDATE or DELETE, where MySQL reads
//     hints): SET_VAR(lock_wait_timeout=N) for metadata locks and, on a
//     SELECT, MAX_EXECUTION_TIME(N000), which also ends a locking read's
//     wait for a row lock (Error 3024). MySQL refuses
//     SET_VAR(innodb_lock_wait_timeout) (Warning 3637 on 9.7, the hint is
//     ignored) and MAX_EXECUTION_TIME on anything but a SELECT: on MySQL an
//     INSERT, UPDATE, REPLACE or DELETE on a pooled connection still waits
//     for a row lock up to the server's innodb_lock_wait_timeout. Sessions
//     the library owns (SessionSQL: the lock backend's connection, a
//     Batcher's renewal) are bounded on every server.
//
// Either form sets the variables for that one statement only: the pooled
// connection's session is left as it was. stmt must begin with its keyword
// (no leading space or comment). Any other server gets stmt unchanged.
func (b Bound) Wrap(stmt string) string {
	n := strconv.FormatInt(b.Secs, 10)
	switch b.Flavor {
	case FlavorMariaDB:
		return "SET STATEMENT innodb_lock_wait_timeout=" + n + ",lock_wait_timeout=" + n + " FOR " + stmt
	case FlavorMySQL:
		kw, rest, _ := strings.Cut(stmt, " ")
		hint := "SET_VAR(lock_wait_timeout=" + n + ")"
		if strings.EqualFold(kw, "SELECT") {
			// Locking reads included; MySQL warns (3125) and
			// ignores it on anything but a SELECT.
			hint = "MAX_EXECUTION_TIME(" + n + "000) " + hint
		}
		return kw + " /*+ " + hint + " */ " + rest
	}
	return stmt
}

// SessionVar is a session variable and the value a session the library
// bounds gives it: a number, or SQL text (DEFAULT, a quoted string).
type SessionVar struct {
	Name  string
	Value any
}

// SessionSQL returns set, the statement that gives a session the values of
// vars. With keep, set first saves the session's own values in user
// variables (@sqlelect_<name>, evaluated before the assignments that
// follow) and restore is the statement that puts them back, for a pooled
// connection that returns to the pool after a bounded while (a Batcher's
// renewal, a fenced transaction); without keep restore is "" (the lock
// backend's connection, which never returns to the pool).
func SessionSQL(keep bool, vars ...SessionVar) (set, restore string) {
	var saves, sets, restores []string
	for _, v := range vars {
		saves = append(saves, "@sqlelect_"+v.Name+" = @@session."+v.Name)
		sets = append(sets, fmt.Sprintf("SESSION %s = %v", v.Name, v.Value))
		restores = append(restores, "SESSION "+v.Name+" = @sqlelect_"+v.Name)
	}
	if !keep {
		return "SET " + strings.Join(sets, ",\n  "), ""
	}
	return "SET " + strings.Join(append(saves, sets...), ",\n  "), "SET " + strings.Join(restores, ",\n  ")
}

// FlavorOf tells the flavour from VERSION(): "10.11.6-MariaDB-…" is
// MariaDB, "8.0.36", "8.4.2-log" or "9.7.4" MySQL 8.0.3+; anything else
// (MySQL 5.7, unknown forks) gets no bounds.
func FlavorOf(version string) Flavor {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return FlavorMariaDB
	}
	var major, minor, patch int
	_, err := fmt.Sscanf(version, "%d.%d.", &major, &minor)        // well formed
	_, _ = fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch) // patch 0 unless a number
	if err == nil && (major > 8 || major == 8 && (minor > 0 || patch >= 3)) {
		return FlavorMySQL
	}
	return FlavorOther
}

// RowQuerier is a *sql.DB, *sql.Conn, *sql.Tx or their sqlx forms.
type RowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ServerVariable reads the server variable name, with its scope
// (global.wsrep_on, session.wait_timeout), through q: its value (NULL reads
// as ""), and ok false when the server has no such variable (it is not that
// kind of server). It is the library's one reader of server variables.
func ServerVariable(ctx context.Context, q RowQuerier, name string) (val string, ok bool, err error) {
	var v sql.NullString
	err = q.QueryRowContext(ctx, `SELECT @@`+name).Scan(&v)
	if mysqlerr.Errno(err) == mysqlerr.UnknownSystemVariable {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading @@%s: %w", name, err)
	}
	return v.String, true, nil
}

// IsOn reports whether a boolean variable's value is on.
func IsOn(v string) bool { return v == "1" || strings.EqualFold(v, "ON") }

// DetectBound reads the server's VERSION() with q and returns the bound of d
// for its flavour.
func DetectBound(ctx context.Context, q RowQuerier, d time.Duration) (Bound, error) {
	var v string
	if err := q.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v); err != nil {
		return Bound{}, fmt.Errorf("stmt: reading the server version: %w", err)
	}
	return NewBound(FlavorOf(v), d), nil
}

// Stmt compiles sql, one of the library's own statements, bounded by b (see
// Bound.Wrap).
func (b Bound) Stmt(sql string) Stmt { return Must(b.Wrap(sql)) }
