package stmt

import (
	"errors"
	"reflect"
	"testing"
)

func TestCompileStmt(t *testing.T) {
	p := Params{Name: "e", Me: "me", Hold: 7, Lease: 1500, Value: "v", Names: []string{"a", "b", "c"}, Acquired: "lock"}
	for _, c := range []struct {
		sql      string
		wantSQL  string
		wantArgs []any
	}{
		{"SELECT 1", "SELECT 1", []any{}},
		{"UPDATE t SET a = :value WHERE anchor = :name AND term = :hold AND b = :lease",
			"UPDATE t SET a = ? WHERE anchor = ? AND term = ? AND b = ?", []any{"v", "e", uint64(7), int64(1500)}},
		{"SELECT ':me', ':x?' FROM t WHERE s = :me AND t = :me", "SELECT ':me', ':x?' FROM t WHERE s = ? AND t = ?", []any{"me", "me"}},
		{"SELECT 1 FROM t WHERE a IN (:names) AND b = :me", "SELECT 1 FROM t WHERE a IN (?,?,?) AND b = ?", []any{"a", "b", "c", "me"}},
		// Scalars on both sides of the list, one of them repeated: each
		// argument at its own placeholder.
		{"SELECT :name FROM t WHERE s = :me AND a IN (:names) AND b = :hold AND c = :me",
			"SELECT ? FROM t WHERE s = ? AND a IN (?,?,?) AND b = ? AND c = ?", []any{"e", "me", "a", "b", "c", uint64(7), "me"}},
		{"SELECT `a:me`, \"b:me\" FROM t WHERE a = :me", "SELECT `a:me`, \"b:me\" FROM t WHERE a = ?", []any{"me"}},
		{"SELECT /*+ SET_VAR(lock_wait_timeout=1) */ 1 FROM t WHERE a = :name", "SELECT /*+ SET_VAR(lock_wait_timeout=1) */ 1 FROM t WHERE a = ?", []any{"e"}},
		{"UPDATE t SET acquired = :acquired WHERE anchor = 'x:me' AND term = :term", "UPDATE t SET acquired = ? WHERE anchor = 'x:me' AND term = ?", []any{"lock", uint64(0)}},
		{"SELECT GET_LOCK('sqlelect:app.service_election:jobs', 0)", "SELECT GET_LOCK('sqlelect:app.service_election:jobs', 0)", []any{}},
	} {
		gotSQL, gotArgs := Must(c.sql).Bind(p)
		if gotSQL != c.wantSQL || !reflect.DeepEqual(gotArgs, c.wantArgs) {
			t.Errorf("Must(%q).Bind = %q %#v, want %q %#v", c.sql, gotSQL, gotArgs, c.wantSQL, c.wantArgs)
		}
	}
	for _, bad := range []string{
		"SELECT 1 FROM t WHERE a = ?",                          // positional
		"SELECT 1 FROM t WHERE a = :nobody",                    // unknown name
		"SELECT 1 FROM t WHERE a IN (:names) OR b IN (:names)", // one list only
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
// lock lists an election once per request), one placeholder each, in order;
// the scalars after the list keep their places whatever its length.
func TestBindList(t *testing.T) {
	s := Must("UPDATE t SET a = :value WHERE b IN (:names) AND c = :term")
	for _, c := range []struct {
		names    []string
		wantSQL  string
		wantArgs []any
	}{
		{[]string{"x", "y", "x"}, "UPDATE t SET a = ? WHERE b IN (?,?,?) AND c = ?", []any{"v", "x", "y", "x", uint64(9)}},
		{[]string{"x"}, "UPDATE t SET a = ? WHERE b IN (?) AND c = ?", []any{"v", "x", uint64(9)}},
		{nil, "UPDATE t SET a = ? WHERE b IN () AND c = ?", []any{"v", uint64(9)}},
	} {
		gotSQL, gotArgs := s.Bind(Params{Value: "v", Term: 9, Names: c.names})
		if gotSQL != c.wantSQL || !reflect.DeepEqual(gotArgs, c.wantArgs) {
			t.Errorf("Bind(%q) = %q %#v, want %q %#v", c.names, gotSQL, gotArgs, c.wantSQL, c.wantArgs)
		}
	}
}
