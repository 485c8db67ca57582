package stmt

import (
	"errors"
	"reflect"
	"testing"
)

// TestCompileStmt: each parameter gets its value at its own place: a
// literal for a number or a plain string, a ? and an argument, in order,
// for a string whose literal would depend on session state (a quote, a
// backslash, non-ASCII) or that the driver's interpolateParams would take
// for a placeholder (a question mark).
func TestCompileStmt(t *testing.T) {
	p := Params{Name: "é", Me: "m'e", Hold: 7, Lease: 1500, Value: `v\`, To: "a?b", Acquired: "lock"}
	for _, c := range []struct {
		sql      string
		wantSQL  string
		wantArgs []any
	}{
		{"SELECT 1", "SELECT 1", nil},
		{"UPDATE t SET a = :value WHERE anchor = :name AND term = :hold AND b = :lease",
			"UPDATE t SET a = ? WHERE anchor = ? AND term = 7 AND b = 1500", []any{`v\`, "é"}},
		{"SELECT ':me', ':x?' FROM t WHERE s = :me AND t = :me", "SELECT ':me', ':x?' FROM t WHERE s = ? AND t = ?", []any{"m'e", "m'e"}},
		// One of them repeated: each argument at its own placeholder.
		{"SELECT :name FROM t WHERE s = :me AND b = :hold AND c = :me AND d = :to",
			"SELECT ? FROM t WHERE s = ? AND b = 7 AND c = ? AND d = ?", []any{"é", "m'e", "m'e", "a?b"}},
		{"SELECT `a:me`, \"b:me\" FROM t WHERE a = :me", "SELECT `a:me`, \"b:me\" FROM t WHERE a = ?", []any{"m'e"}},
		{"SELECT /*+ SET_VAR(lock_wait_timeout=1) */ 1 FROM t WHERE a = :name", "SELECT /*+ SET_VAR(lock_wait_timeout=1) */ 1 FROM t WHERE a = ?", []any{"é"}},
		{"UPDATE t SET acquired = :acquired, b = :priority, c = :tenure WHERE anchor = 'x:me' AND term = :term",
			"UPDATE t SET acquired = 'lock', b = 0, c = 0 WHERE anchor = 'x:me' AND term = 0", nil},
		{"SELECT GET_LOCK('sqlelect:app.service_election:jobs', 0)", "SELECT GET_LOCK('sqlelect:app.service_election:jobs', 0)", nil},
		// Lists beside single values, each in its place (a Batcher's
		// hand-overs).
		{"UPDATE t SET a = :to, b = :lease WHERE c IN (:names) AND d = CASE c :terms END AND e = :me",
			"UPDATE t SET a = ?, b = 1500 WHERE c IN ('x',?) AND d = CASE c  WHEN 'x' THEN 1 WHEN ? THEN 2 END AND e = ?", []any{"a?b", "y'", "y'", "m'e"}},
	} {
		p := p
		p.Names, p.Terms = []string{"x", "y'"}, []uint64{1, 2}
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

// TestLiteral: the values Bind writes into a statement's text, and those it
// leaves to a placeholder.
func TestLiteral(t *testing.T) {
	for _, c := range []struct {
		x    any
		want string // "" for none
	}{
		{"", "''"},
		{"a b-c.d:e/f@g_h~[]{}=+*&^%$#!,;<>|\"`", "'a b-c.d:e/f@g_h~[]{}=+*&^%$#!,;<>|\"`'"},
		{"it's", ""}, {`a\b`, ""}, {"a?b", ""}, {"tab\t", ""}, {"é", ""}, {"\x00", ""},
		{-1, "-1"}, {int64(-9223372036854775808), "-9223372036854775808"}, {uint64(18446744073709551615), "18446744073709551615"},
		{1.5, ""}, {true, ""}, {nil, ""}, {[]byte("a"), ""},
	} {
		got, ok := Literal(c.x)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Literal(%#v) = %q, %v; want %q", c.x, got, ok, c.want)
		}
	}
}

// TestIn: a list of elections gets its elections, repeated ones included
// (a Batcher's lock lists an election once per request), in order, and a
// CASE on them its terms, each name a literal or a placeholder as Bind
// writes values, the arguments in the text's order; the text after the
// lists is kept whatever its length.
func TestIn(t *testing.T) {
	const q = "UPDATE t SET a = 1 WHERE b IN (:names) AND c = 2"
	const qt = "UPDATE t SET a = CASE b :terms END WHERE b IN (:names) AND c < CASE b :terms END"
	for _, c := range []struct {
		query    string
		names    []string
		terms    []uint64
		wantSQL  string
		wantArgs []any
	}{
		{q, []string{"x", "y", "x"}, nil, "UPDATE t SET a = 1 WHERE b IN ('x','y','x') AND c = 2", nil},
		{q, []string{"x"}, nil, "UPDATE t SET a = 1 WHERE b IN ('x') AND c = 2", nil},
		{q, nil, nil, "UPDATE t SET a = 1 WHERE b IN () AND c = 2", nil},
		{q, []string{"x", "it's", "é"}, nil, "UPDATE t SET a = 1 WHERE b IN ('x',?,?) AND c = 2", []any{"it's", "é"}},
		{qt, []string{"x", "é"}, []uint64{7, 18446744073709551615},
			"UPDATE t SET a = CASE b  WHEN 'x' THEN 7 WHEN ? THEN 18446744073709551615 END WHERE b IN ('x',?) AND c < CASE b  WHEN 'x' THEN 7 WHEN ? THEN 18446744073709551615 END",
			[]any{"é", "é", "é"}},
	} {
		gotSQL, gotArgs := In(c.query, c.names, c.terms)
		if gotSQL != c.wantSQL || !reflect.DeepEqual(gotArgs, c.wantArgs) {
			t.Errorf("In(%q, %q, %v) = %q %#v, want %q %#v", c.query, c.names, c.terms, gotSQL, gotArgs, c.wantSQL, c.wantArgs)
		}
	}
	defer func() {
		if err, _ := recover().(error); !errors.Is(err, ErrInvalid) {
			t.Errorf("In with :me did not panic with ErrInvalid: %v", err)
		}
	}()
	In("UPDATE t SET a = :me WHERE b IN (:names)", []string{"x"}, nil)
}

// TestRows: Rebind writes a statement's parameters as the columns of a
// :rows table, but those kept, and Bind writes that table one SELECT per
// row, its columns named in the first, the values as Bind writes any.
func TestRows(t *testing.T) {
	s := Must(Rebind(`SELECT :me, :hold + 1, ':floor' FROM (:rows) r WHERE r.p_name = :name`, "r", "me", "rows"))
	for _, tc := range []struct {
		rows     []Params
		want     string
		wantArgs []any
	}{
		{[]Params{{Name: "a", Hold: 7, Lease: 10, Value: "v", Priority: 2, Floor: 6, First: true}},
			`SELECT 'x', r.p_hold + 1, ':floor' FROM (SELECT 'a' AS p_name,7 AS p_hold,10 AS p_lease,'v' AS p_value,2 AS p_priority,6 AS p_floor,'first' AS p_insert) r WHERE r.p_name = r.p_name`, nil},
		{[]Params{{Name: "a"}, {Name: "b", Value: "it's"}},
			`SELECT 'x', r.p_hold + 1, ':floor' FROM (SELECT 'a' AS p_name,0 AS p_hold,0 AS p_lease,'' AS p_value,0 AS p_priority,0 AS p_floor,'insert' AS p_insert UNION ALL SELECT 'b',0,0,?,0,0,'insert') r WHERE r.p_name = r.p_name`, []any{"it's"}},
	} {
		got, args := s.Bind(Params{Me: "x", Rows: tc.rows})
		if got != tc.want || !reflect.DeepEqual(args, tc.wantArgs) {
			t.Errorf("got %s %v\nwant %s %v", got, args, tc.want, tc.wantArgs)
		}
	}
}
