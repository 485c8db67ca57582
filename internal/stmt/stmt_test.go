package stmt

import (
	"errors"
	"reflect"
	"testing"
)

func TestCompileStmt(t *testing.T) {
	p := Params{Name: "e", Me: "me", Hold: 7, Lease: 1500, Value: "v", Acquired: "lock"}
	for _, c := range []struct {
		sql      string
		wantSQL  string
		wantArgs []any
	}{
		{"SELECT 1", "SELECT 1", []any{}},
		{"UPDATE t SET a = :value WHERE anchor = :name AND term = :hold AND b = :lease",
			"UPDATE t SET a = ? WHERE anchor = ? AND term = ? AND b = ?", []any{"v", "e", uint64(7), int64(1500)}},
		{"SELECT ':me', ':x?' FROM t WHERE s = :me AND t = :me", "SELECT ':me', ':x?' FROM t WHERE s = ? AND t = ?", []any{"me", "me"}},
		// One of them repeated: each argument at its own placeholder.
		{"SELECT :name FROM t WHERE s = :me AND b = :hold AND c = :me",
			"SELECT ? FROM t WHERE s = ? AND b = ? AND c = ?", []any{"e", "me", uint64(7), "me"}},
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
		"SELECT 1 FROM t WHERE a = ?",         // positional
		"SELECT 1 FROM t WHERE a = :nobody",   // unknown name
		"SELECT 1 FROM t WHERE a IN (:names)", // no list parameter (a Batcher's inNames)
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
