package stmt

import (
	"testing"
	"time"
)

func TestFlavorOf(t *testing.T) {
	for v, want := range map[string]Flavor{
		"10.11.6-MariaDB-0+deb12u1":    FlavorMariaDB,
		"5.5.5-10.11.6-MariaDB":        FlavorMariaDB,
		"11.8.6-MariaDB-log":           FlavorMariaDB,
		"8.0.36":                       FlavorMySQL,
		"8.0.3-rc-log":                 FlavorMySQL,
		"8.0.2-dmr":                    FlavorOther,
		"8.4.2-log":                    FlavorMySQL,
		"9.7.4":                        FlavorMySQL,
		"5.7.44-log":                   FlavorOther,
		"":                             FlavorOther,
		"garbage":                      FlavorOther,
		"8.0.36-0ubuntu0.22.04.1-log":  FlavorMySQL,
		"10.6.16-MariaDB-1:10.6.16+ma": FlavorMariaDB,
	} {
		if got := FlavorOf(v); got != want {
			t.Errorf("FlavorOf(%q) = %d, want %d", v, got, want)
		}
	}
}

func TestLockBoundWrap(t *testing.T) {
	const update = "UPDATE t SET a = 1 WHERE b = ?"
	mysqlSelect := NewBound(FlavorMySQL, 3*time.Second).Wrap("SELECT 1 FROM t FOR UPDATE")
	if want := "SELECT /*+ MAX_EXECUTION_TIME(3000) SET_VAR(lock_wait_timeout=3) */ 1 FROM t FOR UPDATE"; mysqlSelect != want {
		t.Errorf("MySQL SELECT: %q, want %q", mysqlSelect, want)
	}
	for _, c := range []struct {
		b    Bound
		want string
	}{
		{Bound{}, update},
		{NewBound(FlavorOther, 5*time.Second), update},
		{NewBound(FlavorMariaDB, 5*time.Second), "SET STATEMENT innodb_lock_wait_timeout=5,lock_wait_timeout=5 FOR " + update},
		{NewBound(FlavorMySQL, 2500*time.Millisecond), "UPDATE /*+ SET_VAR(lock_wait_timeout=2) */ t SET a = 1 WHERE b = ?"},
		{NewBound(FlavorMariaDB, 100*time.Millisecond), "SET STATEMENT innodb_lock_wait_timeout=1,lock_wait_timeout=1 FOR " + update},
	} {
		if got := c.b.Wrap(update); got != c.want {
			t.Errorf("%+v.Wrap = %q, want %q", c.b, got, c.want)
		}
	}
}

func TestFlavorOfMalformed(t *testing.T) {
	for v, want := range map[string]Flavor{
		"9.7": FlavorOther, "9.7.x": FlavorMySQL, "9.7junk.2": FlavorOther, "9junk.1.2": FlavorOther,
		"8.0.x": FlavorOther, "8.0junk.3": FlavorOther, "8.0.3x": FlavorMySQL, "10.0": FlavorOther,
	} {
		if got := FlavorOf(v); got != want {
			t.Errorf("FlavorOf(%q) = %d, want %d", v, got, want)
		}
	}
}
