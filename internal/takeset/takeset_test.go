package takeset

import (
	"database/sql"
	"testing"
)

// TestAffected: what a heartbeat's affected rows would have said, from its
// row before and after it: a change of any column is 2, none 0; a row that
// was missing is 1 only when it holds what the insert writes.
func TestAffected(t *testing.T) {
	col := func(v string) []sql.NullString {
		return []sql.NullString{{String: "e", Valid: true}, {String: v, Valid: true}}
	}
	inserted := row{id: "me", acquired: "insert", term: 9, all: col("a")}
	for _, tc := range []struct {
		name   string
		before row
		had    bool
		after  row
		want   int64
	}{
		{"renewed", row{id: "me", all: col("a")}, true, row{id: "me", all: col("b")}, 2},
		{"no change", row{id: "L", all: col("a")}, true, row{id: "L", all: col("a")}, 0},
		{"inserted", row{}, false, inserted, 1},
		{"inserted first", row{}, false, row{id: "me", acquired: "first", all: col("a")}, 1},
		{"another's row, inserted meanwhile", row{}, false, row{id: "L", acquired: "insert", all: col("a")}, 0},
		{"an operator's row naming me, with a request", row{}, false, row{id: "me", acquired: "insert", transfer: true, all: col("a")}, 0},
		{"an operator's row naming me, released", row{}, false, row{id: "me", acquired: "first", released: true, all: col("a")}, 0},
		{"an operator's row naming me, claimed by the heartbeat", row{}, false, row{id: "me", acquired: "claimed", all: col("a")}, 0},
	} {
		if got := affected(tc.before, tc.had, tc.after, "me"); got != tc.want {
			t.Errorf("%s: %d affected rows, want %d", tc.name, got, tc.want)
		}
	}
}
