package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// DSTZone adds to the server of db (an administrative pool) a named time
// zone with daylight saving time, one hour ahead of UTC in winter and two
// in summer, and returns its name ("Sqlelect/DST<n>"), to be set as a
// session's time_zone. The server's own time zone tables may be empty (a
// throwaway server's are): the zone is written into mysql.time_zone* by
// hand, in the tables' common form on MySQL and MariaDB, without
// mysql_tzinfo_to_sql. Its transitions run from 2000 to 2040 (the last
// Sunday of March and of October are approximated by the 31st).
func DSTZone(t testing.TB, db *sql.DB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("testdb: DSTZone: %v", err)
	}
	defer conn.Close()
	exec := func(q string, args ...any) sql.Result {
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("testdb: DSTZone: %s: %v", q, err)
		}
		return res
	}
	res := exec(`INSERT INTO mysql.time_zone (Use_leap_seconds) VALUES ('N')`)
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatalf("testdb: DSTZone: %v", err)
	}
	name := fmt.Sprintf("Sqlelect/DST%d", id)
	exec(`INSERT INTO mysql.time_zone_name (Name, Time_zone_id) VALUES (?, ?)`, name, id)
	exec(`INSERT INTO mysql.time_zone_transition_type (Time_zone_id, Transition_type_id, `+"`Offset`"+`, Is_DST, Abbreviation)
VALUES (?, 0, 3600, 0, 'XST'), (?, 1, 7200, 1, 'XDT')`, id, id)
	var vals []string
	var args []any
	for y := 2000; y <= 2040; y++ {
		for _, tr := range []struct {
			month time.Month
			typ   int
		}{{time.March, 1}, {time.October, 0}} {
			vals = append(vals, "(?, ?, ?)")
			args = append(args, id, time.Date(y, tr.month, 31, 1, 0, 0, 0, time.UTC).Unix(), tr.typ)
		}
	}
	exec(`INSERT INTO mysql.time_zone_transition (Time_zone_id, Transition_time, Transition_type_id) VALUES `+
		strings.Join(vals, ", "), args...)
	return name
}
