package operator

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestStatementsAsHandAssembled: the operator's statements are those that
// were assembled by hand before the statement compiler (issue 15; they were
// election's assumeSQL and reelectSQL, checked there by
// TestStatementsAsHandAssembled), up to whitespace, with the same
// arguments in the same order; every placeholder has its argument, and no
// statement reads the session's clock NOW() (but to compare it with
// SYSDATE(6) in dbclock.Trusted).
func TestStatementsAsHandAssembled(t *testing.T) {
	for _, tc := range []struct {
		table string
		bound stmt.Bound
		p     stmt.Params
	}{
		{"service_election", stmt.Bound{}, stmt.Params{Name: "e1", Me: "me", Lease: 15000}},
		{"db1.elections", stmt.NewBound(stmt.FlavorMariaDB, 5*time.Second), stmt.Params{Name: "e2", Me: "you", Lease: 1, Floor: 1763790000123457, To: "x"}},
		{"db1.elections", stmt.NewBound(stmt.FlavorMySQL, 3*time.Second), stmt.Params{Name: "e2", Me: "you", Lease: 1, Floor: 1763790000123457}},
	} {
		tbl, p := ident.Quote(tc.table), tc.p
		for _, s := range []struct {
			what, built, legacy string
			args                []any
		}{
			{"Assume", assumeSQL(tbl), `REPLACE INTO ` + tbl + ` (anchor, service_id, last_seen_active, term,
  term_started_at, lease_ms, released, acquired, value, backend, connection_id)
SELECT ?, ?, ` + dbclock.Now + `, GREATEST(COALESCE(MAX(term), 0) + 1, GREATEST(` + dbclock.TermNow + `, ? + 1)), ` + dbclock.Now + `,
  COALESCE(MAX(lease_ms), ?), 0, 'operator', '', COALESCE(MAX(backend), 'table'), NULL
FROM ` + tbl + ` WHERE anchor = ? HAVING ` + dbclock.Trusted, []any{p.Name, p.Me, p.Floor, p.Lease, p.Name}},
			{"Reelect", reelectSQL(tbl), `DELETE FROM ` + tbl + ` WHERE anchor = ?`, []any{p.Name}},
			{"request", requestSQL(tbl), `UPDATE ` + tbl + ` SET transfer_to = ? WHERE anchor = ? AND released = 0 AND ` + dbclock.Live, []any{p.To, p.Name}},
		} {
			q, args := tc.bound.Stmt(s.built).Bind(p)
			legacy, largs := testdb.Inline(tc.bound.Wrap(s.legacy), s.args)
			if shape(q) != shape(legacy) || !reflect.DeepEqual(args, largs) {
				t.Errorf("%s on %s: %s %#v\nwas %s %#v", s.what, tc.table, q, args, legacy, largs)
			}
			if n := strings.Count(q, "?"); n != len(args) {
				t.Errorf("%s on %s: %d placeholders, %d arguments", s.what, tc.table, n, len(args))
			}
			if strings.Contains(strings.ReplaceAll(q, `SYSDATE(6)<>NOW(6)`, ""), "NOW(") {
				t.Errorf("%s reads NOW():\n%s", s.what, q)
			}
		}
	}
}

// shape is sql without its whitespace.
func shape(sql string) string { return strings.Join(strings.Fields(sql), "") }
