// Package stmt compiles the library's statements, written once as SQL with
// named parameters, and binds their values (as literals where they read the
// same under any session state, see Bind); and bounds a statement's lock
// waits on the server (Bound).
package stmt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This package is the one place where the library's statements get their
// values. A statement is written once, as SQL with named parameters (:me,
// :hold, …); compiling it splits the text at each name and remembers the
// name, and binding writes the values from a Params in the same order. Conditions and expressions are Go constants of such SQL, so a
// condition that a statement repeats carries its parameters wherever it goes,
// and no list of positional arguments is kept by hand next to the text.

// ErrInvalid is a statement Must refuses.
var ErrInvalid = errors.New("stmt: invalid statement")

// Params are the values a statement's named parameters take.
type Params struct {
	Name     string // :name, the election (the row's anchor)
	Me       string // :me, the candidate's ID
	Hold     uint64 // :hold, the term the candidate holds, 0 for none
	Lease    int64  // :lease, a lease in milliseconds
	Value    string // :value, the value the candidate publishes
	To       string // :to, a transfer's target ('' for anyone)
	Priority int    // :priority, the candidate's Config.Preference.Priority
	Term     uint64 // :term, the term of the row a candidate read (preferSQL, the lock backend's take)
	Tenure   int64  // :tenure, the candidate's PreferenceTenure in milliseconds
	Floor    uint64 // :floor, the election's term floor (0 when it has none)
	First    bool   // the election has no floor row, it never existed: :insert is 'first'
	Acquired string // :acquired, how a lock holder took the row (see the lock backend's follow)
	// A statement on many elections: :names is the list of Names (at
	// least one for valid SQL; a name twice is listed twice), :terms the
	// branches of a CASE on an election's name that give each its term
	// (WHEN name THEN term …, Terms[i] for Names[i]; the statement writes
	// CASE <column> :terms END).
	Names []string
	Terms []uint64
	// :rows is a derived table of Rows (SELECT … UNION ALL SELECT …), one
	// row each with a column p_<name> for each of its parameters :name,
	// :hold, :lease, :value, :priority, :floor and :insert, for a
	// statement written with Rebind: one statement for many elections
	// whose every parameter may differ.
	Rows []Params
}

// value is p's value of parameter name, false for no such parameter.
// :insert is how an insert acquires the row (its acquired column): 'first'
// for an election that never existed (First), else 'insert'. A switch, not
// a map: Bind runs at every statement.
func (p *Params) value(name string) (any, bool) {
	switch name {
	case "name":
		return p.Name, true
	case "me":
		return p.Me, true
	case "hold":
		return p.Hold, true
	case "lease":
		return p.Lease, true
	case "value":
		return p.Value, true
	case "to":
		return p.To, true
	case "priority":
		return p.Priority, true
	case "term":
		return p.Term, true
	case "tenure":
		return p.Tenure, true
	case "floor":
		return p.Floor, true
	case "insert":
		if p.First {
			return "first", true
		}
		return "insert", true
	case "acquired":
		return p.Acquired, true
	case "names":
		return p.Names, true
	case "terms":
		return p.Terms, true
	case "rows":
		return p.Rows, true
	}
	return nil, false
}

// Stmt is a compiled statement: its text around each parameter, and the
// parameters' names in order. A Stmt is immutable and safe to share.
type Stmt struct {
	parts []string // the text before each parameter, then after the last
	names []string
}

// Must compiles sql, which is one of the library's own statements, with
// named parameters (a colon and a parameter's name, see Params) into a
// Stmt; it panics (ErrInvalid) on an error, a bug caught by any test that
// builds the statement. Text in quotes ('…', "…" or `…`, without backslash
// escapes) is left alone; a positional ? outside quotes is refused, so that
// every argument comes from a name.
func Must(sql string) Stmt {
	var s Stmt
	start := 0 // where the text of the next part begins
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; {
		case c == '\'' || c == '"' || c == '`':
			end := strings.IndexByte(sql[i+1:], c)
			if end < 0 {
				panic(fmt.Errorf("%w: unterminated quote in %q", ErrInvalid, sql))
			}
			i += end + 1
		case c == '?':
			panic(fmt.Errorf("%w: positional placeholder in %q", ErrInvalid, sql))
		case c == ':' && i+1 < len(sql) && isParamByte(sql[i+1]):
			j := i + 1
			for j < len(sql) && isParamByte(sql[j]) {
				j++
			}
			name := sql[i+1 : j]
			if _, ok := (&Params{}).value(name); !ok {
				panic(fmt.Errorf("%w: unknown parameter :%s in %q", ErrInvalid, name, sql))
			}
			s.parts, s.names = append(s.parts, sql[start:i]), append(s.names, name)
			start, i = j, j-1
		}
	}
	s.parts = append(s.parts, sql[start:])
	return s
}

func isParamByte(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' }

// Bind returns the statement's text with p's values, and the arguments of
// the placeholders left in it. A number, or a string of printable ASCII
// without a quote, a backslash or a question mark, is written into the
// text as a literal: a statement without arguments takes one round trip
// (the text protocol), where arguments cost a server-side prepare, an
// execute and a close unless the DSN sets interpolateParams. Any other
// string stays a ? and an argument: its literal would depend on session
// state the library did not set (sql_mode's NO_BACKSLASH_ESCAPES, the
// character set).
func (s Stmt) Bind(p Params) (string, []any) {
	var b strings.Builder
	var args []any
	for i, name := range s.names {
		b.WriteString(s.parts[i])
		switch name {
		case "names":
			for k, n := range p.Names {
				if k > 0 {
					b.WriteByte(',')
				}
				args = Put(&b, args, n)
			}
		case "terms":
			if len(p.Terms) != len(p.Names) {
				panic(fmt.Errorf("%w: %d terms for %d names in %q", ErrInvalid, len(p.Terms), len(p.Names), strings.Join(s.parts, "?")))
			}
			for k, n := range p.Names {
				b.WriteString(" WHEN ")
				args = Put(&b, args, n)
				b.WriteString(" THEN ")
				args = Put(&b, args, p.Terms[k])
			}
		case "rows":
			for k, r := range p.Rows {
				if k > 0 {
					b.WriteString(" UNION ALL ")
				}
				b.WriteString("SELECT ")
				for c, col := range [...]string{"name", "hold", "lease", "value", "priority", "floor", "insert"} {
					if c > 0 {
						b.WriteByte(',')
					}
					v, _ := r.value(col)
					args = Put(&b, args, v)
					if k == 0 {
						b.WriteString(" AS p_" + col)
					}
				}
			}
		default:
			v, _ := p.value(name)
			args = Put(&b, args, v)
		}
	}
	b.WriteString(s.parts[len(s.names)])
	return b.String(), args
}

// Rebind returns sql with each named parameter but those in keep written
// as the column of table alias that a :rows table has for it (alias.p_name
// for :name): the text of a statement on one election, as the same
// statement on each row of a :rows table.
func Rebind(sql, alias string, keep ...string) string {
	s := Must(sql)
	var b strings.Builder
	for i, name := range s.names {
		b.WriteString(s.parts[i])
		if slices.Contains(keep, name) {
			b.WriteString(":" + name)
		} else {
			b.WriteString(alias + ".p_" + name)
		}
	}
	b.WriteString(s.parts[len(s.names)])
	return b.String()
}

// Put writes x into b as Bind does: its literal, or a ? with x appended to
// args; it returns args.
func Put(b *strings.Builder, args []any, x any) []any {
	if lit, ok := Literal(x); ok {
		b.WriteString(lit)
		return args
	}
	b.WriteByte('?')
	return append(args, x)
}

// Literal is x as an SQL literal that reads the same under any session
// state, and false when there is none (see Bind).
func Literal(x any) (string, bool) {
	switch x := x.(type) {
	case int, int64, uint64:
		return fmt.Sprint(x), true // decimal digits, with a sign when negative
	case string:
		if !strings.ContainsFunc(x, func(r rune) bool { return r < ' ' || r > '~' || r == '\'' || r == '\\' || r == '?' }) {
			return "'" + x + "'", true
		}
	}
	return "", false
}

// Execer is a *sql.DB, *sql.Conn or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Exec runs s with p on db.
func (s Stmt) Exec(ctx context.Context, db Execer, p Params) (sql.Result, error) {
	query, args := s.Bind(p)
	return db.ExecContext(ctx, query, args...)
}

// Affected runs s with p on db and returns its affected rows.
func (s Stmt) Affected(ctx context.Context, db Execer, p Params) (int64, error) {
	res, err := s.Exec(ctx, db, p)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QueryRow runs s, a query of one row, with p on db.
func (s Stmt) QueryRow(ctx context.Context, db RowQuerier, p Params) *sql.Row {
	query, args := s.Bind(p)
	return db.QueryRowContext(ctx, query, args...)
}

// In returns query, a statement on many elections (see Params.Names)
// with no other parameter, with names and terms bound; it panics
// (ErrInvalid) on another parameter, which it would bind as a zero value.
func In(query string, names []string, terms []uint64) (string, []any) {
	s := Must(query)
	for _, n := range s.names {
		if n != "names" && n != "terms" {
			panic(fmt.Errorf("%w: :%s in %q (In binds only :names and :terms)", ErrInvalid, n, query))
		}
	}
	return s.Bind(Params{Names: names, Terms: terms})
}
