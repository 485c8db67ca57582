// Package stmt compiles the library's statements, written once as SQL with
// named parameters, into text with placeholders and binds their arguments;
// and bounds a statement's lock waits on the server (Bound).
package stmt

import (
	"errors"
	"fmt"
	"strings"
)

// This package is the one place where the library's statements get their
// placeholders and arguments. A statement is written once, as SQL with named
// parameters (:me, :hold, …); compiling it replaces each name by a ? and
// remembers the name, and binding takes the arguments from a Params in the
// same order. Conditions and expressions are Go constants of such SQL, so a
// condition that a statement repeats carries its parameters wherever it goes,
// and no list of positional arguments is kept by hand next to the text.

// ErrInvalid is a statement Compile refuses.
var ErrInvalid = errors.New("stmt: invalid statement")

// Params are the values a statement's named parameters take.
type Params struct {
	Name     string   // :name, the election (the row's anchor)
	Me       string   // :me, the candidate's ID
	Hold     uint64   // :hold, the term the candidate holds, 0 for none
	Lease    int64    // :lease, a lease in milliseconds
	Value    string   // :value, the value the candidate publishes
	To       string   // :to, a transfer's target ('' for anyone)
	Priority int      // :priority, the candidate's Config.Preference.Priority
	Term     uint64   // :term, the term of the row a candidate read (preferSQL, the lock backend's take)
	Tenure   int64    // :tenure, the candidate's PreferenceTenure in milliseconds
	Names    []string // :names, a list of elections: expands to one ? each
	Floor    uint64   // :floor, the election's term floor (0 when it has none)
	First    bool     // the election has no floor row, it never existed: :insert is 'first'
	Acquired string   // :acquired, how a lock holder took the row (see the lock backend's takeParams)
}

// param is a named parameter, resolved when a statement is compiled.
type param uint8

const (
	paramName param = iota
	paramMe
	paramHold
	paramLease
	paramValue
	paramTo
	paramPriority
	paramTerm
	paramTenure
	paramFloor
	paramInsert
	paramAcquired
	paramNames
)

// lookupParam resolves a parameter's name.
func lookupParam(name string) (param, bool) {
	switch name {
	case "name":
		return paramName, true
	case "me":
		return paramMe, true
	case "hold":
		return paramHold, true
	case "lease":
		return paramLease, true
	case "value":
		return paramValue, true
	case "to":
		return paramTo, true
	case "priority":
		return paramPriority, true
	case "term":
		return paramTerm, true
	case "tenure":
		return paramTenure, true
	case "floor":
		return paramFloor, true
	case "insert":
		return paramInsert, true
	case "acquired":
		return paramAcquired, true
	case "names":
		return paramNames, true
	}
	return 0, false
}

// scalars are p's values of the scalar parameters, indexed by param, each
// converted to an interface once for all its placeholders.
func (p *Params) scalars() [paramNames]any {
	return [paramNames]any{paramName: p.Name, paramMe: p.Me, paramHold: p.Hold, paramLease: p.Lease, paramValue: p.Value, paramTo: p.To,
		paramPriority: p.Priority, paramTerm: p.Term, paramTenure: p.Tenure, paramFloor: p.Floor, paramInsert: p.Insert(),
		paramAcquired: p.Acquired}
}

// Insert is :insert, how an insert acquires the row (its acquired column):
// 'first' for an election that never existed (First), else 'insert'.
func (p *Params) Insert() string {
	if p.First {
		return "first"
	}
	return "insert"
}

// Stmt is a compiled statement: text between its parameters, and the
// parameters in the order of their placeholders. A Stmt is immutable and
// safe to share.
type Stmt struct {
	parts  []string // len(params)+1 pieces of text around the placeholders
	params []param
	list   bool   // a parameter is a list: the text depends on its length
	text   string // the parts joined with ?, without a list
}

// Compile compiles sql with named parameters (a colon and a parameter's
// name, see lookupParam) into a Stmt. Text in quotes ('…', "…" or `…`,
// without backslash escapes) is left alone; a positional ? outside quotes is
// refused, so that every argument comes from a name.
func Compile(sql string) (Stmt, error) {
	var s Stmt
	var cur strings.Builder
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			end := strings.IndexByte(sql[i+1:], c)
			if end < 0 {
				return Stmt{}, fmt.Errorf("%w: unterminated quote in %q", ErrInvalid, sql)
			}
			cur.WriteString(sql[i : i+end+2])
			i += end + 1
		case c == '?':
			return Stmt{}, fmt.Errorf("%w: positional placeholder in %q", ErrInvalid, sql)
		case c == ':' && i+1 < len(sql) && isParamByte(sql[i+1]):
			j := i + 1
			for j < len(sql) && isParamByte(sql[j]) {
				j++
			}
			id, ok := lookupParam(sql[i+1 : j])
			if !ok {
				return Stmt{}, fmt.Errorf("%w: unknown parameter :%s in %q", ErrInvalid, sql[i+1:j], sql)
			}
			s.list = s.list || id == paramNames
			s.parts = append(s.parts, cur.String())
			s.params = append(s.params, id)
			cur.Reset()
			i = j - 1
		default:
			cur.WriteByte(c)
		}
	}
	s.parts = append(s.parts, cur.String())
	if !s.list {
		s.text = strings.Join(s.parts, "?")
	}
	return s, nil
}

func isParamByte(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' }

// Must compiles sql, which is one of the library's own statements: an
// error is a bug, caught by any test that builds the statement.
func Must(sql string) Stmt {
	s, err := Compile(sql)
	if err != nil {
		panic(err)
	}
	return s
}

// Bind returns the statement's text and its arguments taken from p, in the
// order of the placeholders. A list parameter becomes one placeholder per
// element (at least one element is needed for valid SQL).
func (s Stmt) Bind(p Params) (string, []any) {
	v := p.scalars()
	if !s.list {
		args := make([]any, len(s.params))
		for i, id := range s.params {
			args[i] = v[id]
		}
		return s.text, args
	}
	args := make([]any, 0, len(s.params)+len(p.Names))
	var b strings.Builder
	for i, id := range s.params {
		b.WriteString(s.parts[i])
		if id != paramNames {
			b.WriteByte('?')
			args = append(args, v[id])
			continue
		}
		for j, name := range p.Names {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args = append(args, name)
		}
	}
	b.WriteString(s.parts[len(s.parts)-1])
	return b.String(), args
}
