package stmt

import (
	"errors"
	"reflect"
	"testing"
)

// TestCompileStmt: each parameter gets its value at its own place: a
// literal for numbers and plain strings, a ? and an argument, in order,
// for the strings that must not be literals (see TestBindList).
func TestCompileStmt(t *testing.T) {
	p := Params{Name: "é", Me: "m'e", Hold: 7, Lease: 1500, Value: `v\`, Names: []string{"a", "b?", "c"}, Acquired: "lock"}
	for _, c := range []struct {
		sql      string
		wantSQL  string
		wantArgs []any
	}{
		{"SELECT 1", "SELECT 1", nil},
		{"UPDATE t SET a = :value WHERE anchor = :name AND term = :hold AND b = :lease",
			"UPDATE t SET a = ? WHERE anchor = ? AND term = 7 AND b = 1500", []any{`v\`, "é"}},
		{"SELECT ':me', ':x?' FROM t WHERE s = :me AND t = :me", "SELECT ':me', ':x?' FROM t WHERE s = ? AND t = ?", []any{"m'e", "m'e"}},
		{"SELECT 1 FROM t WHERE a IN (:names) AND b = :me", "SELECT 1 FROM t WHERE a IN ('a',?,'c') AND b = ?", []any{"b?", "m'e"}},
		// Scalars on both sides of the list, one of them repeated: each
		// argument at its own placeholder.
		{"SELECT :name FROM t WHERE s = :me AND a IN (:names) AND b = :hold AND c = :me",
			"SELECT ? FROM t WHERE s = ? AND a IN ('a',?,'c') AND b = 7 AND c = ?", []any{"é", "m'e", "b?", "m'e"}},
		{"SELECT `a:me`, \"b:me\" FROM t WHERE a = :me", "SELECT `a:me`, \"b:me\" FROM t WHERE a = ?", []any{"m'e"}},
		{"SELECT /*+ SET_VAR(lock_wait_timeout=1) */ 1 FROM t WHERE a = :name", "SELECT /*+ SET_VAR(lock_wait_timeout=1) */ 1 FROM t WHERE a = ?", []any{"é"}},
		{"UPDATE t SET acquired = :acquired WHERE anchor = 'x:me' AND term = :term", "UPDATE t SET acquired = 'lock' WHERE anchor = 'x:me' AND term = 0", nil},
		{"SELECT GET_LOCK('sqlelect:app.service_election:jobs', 0)", "SELECT GET_LOCK('sqlelect:app.service_election:jobs', 0)", nil},
	} {
		gotSQL, gotArgs := Must(c.sql).Bind(p)
		if gotSQL != c.wantSQL || !reflect.DeepEqual(gotArgs, c.wantArgs) {
			t.Errorf("Must(%q).Bind = %q %#v, want %q %#v", c.sql, gotSQL, gotArgs, c.wantSQL, c.wantArgs)
		}
	}
	for _, bad := range []string{
		"SELECT 1 FROM t WHERE a = ?",       // positional
		"SELECT 1 FROM t WHERE a = :nobody", // unknown name
		"SELECT 'unterminated FROM t",
	} {
		func() {
			defer func() {
				if err, _ := recover().(error); !errors.Is(err, ErrInvalid) {
					t.Errorf("Must(%q) did not panic with ErrInvalid: %v", bad, err)
				}
			}()
			Must(bad)
		}()
	}
}

// TestBindList: a list's elements go, repeated ones included (a Batcher's
// lock lists an election once per request), one value each, in order; the
// scalars after the list keep their places whatever its length. Numbers
// and plain ASCII strings are literals in the text (one round trip); a
// string whose literal depends on session state (a quote, a backslash,
// non-ASCII) or that the driver's interpolateParams would take for a
// placeholder (a question mark) stays a ? with its argument.
func TestBindList(t *testing.T) {
	s := Must("UPDATE t SET a = :value WHERE b IN (:names) AND c = :term")
	for _, c := range []struct {
		value    string
		names    []string
		wantSQL  string
		wantArgs []any
	}{
		{"v", []string{"x", "y", "x"}, "UPDATE t SET a = 'v' WHERE b IN ('x','y','x') AND c = 9", nil},
		{"v", []string{"x"}, "UPDATE t SET a = 'v' WHERE b IN ('x') AND c = 9", nil},
		{"v", nil, "UPDATE t SET a = 'v' WHERE b IN () AND c = 9", nil},
		{"", []string{"a b-c.d:e/f@g_h"}, "UPDATE t SET a = '' WHERE b IN ('a b-c.d:e/f@g_h') AND c = 9", nil},
		{"it's", []string{`a\b`, "x", "é", "a?b", "tab\t"}, "UPDATE t SET a = ? WHERE b IN (?,'x',?,?,?) AND c = 9",
			[]any{"it's", `a\b`, "é", "a?b", "tab\t"}},
	} {
		gotSQL, gotArgs := s.Bind(Params{Value: c.value, Term: 9, Names: c.names})
		if gotSQL != c.wantSQL || !reflect.DeepEqual(gotArgs, c.wantArgs) {
			t.Errorf("Bind(%q, %q) = %q %#v, want %q %#v", c.value, c.names, gotSQL, gotArgs, c.wantSQL, c.wantArgs)
		}
	}
}
