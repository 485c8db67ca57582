package schema

import (
	"fmt"
	"io/fs"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sqlelect/sqlelect/migrations"
)

// TestStatements: a script splits after each line that ends with a
// semicolon, outside comment lines; a semicolon within a line (in quotes,
// in a comment) splits nothing, and what holds no code is dropped.
func TestStatements(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         []string
	}{
		{"one", "SELECT 1;", []string{"SELECT 1"}},
		{"no final semicolon", "SELECT 1;\nSELECT 2", []string{"SELECT 1", "SELECT 2"}},
		{"several lines", "CREATE TABLE t (\n  a INT\n) ;\r\n  DROP TABLE t;  \n", []string{"CREATE TABLE t (\n  a INT\n)", "DROP TABLE t"}},
		{"semicolons within a line", `SELECT 'a;b', "c;d", ` + "`e;f`" + `, 'it''s;', 'x\';' /* g; */ -- h; i` + "\nFROM t;",
			[]string{`SELECT 'a;b', "c;d", ` + "`e;f`" + `, 'it''s;', 'x\';' /* g; */ -- h; i` + "\nFROM t"}},
		{"comments", "-- a; b\n  -- c;\nSELECT 1;\n-- trailing;\n", []string{"-- a; b\n  -- c;\nSELECT 1"}},
		{"minus is no comment", "SELECT 1--1;", []string{"SELECT 1--1"}},
		{"only comments", "-- nothing;\n\n-- here;\n", nil},
		{"empty statements", ";\n  ;\nSELECT 1;\n;\n", []string{"SELECT 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statements(tc.script); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("statements(%q) = %q, want %q", tc.script, got, tc.want)
			}
		})
	}
}

// TestStatementsOfMigrations: every embedded migration splits into as
// many statements as it has lines that end one (the files' layout), and
// no statement is only a comment (the server refuses an empty query).
func TestStatementsOfMigrations(t *testing.T) {
	names, err := fs.Glob(migrations.FS(), "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	for _, name := range names {
		data, err := fs.ReadFile(migrations.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for i, l := range strings.Split(string(data), "\n") {
			text := strings.TrimSpace(l)
			if strings.HasPrefix(text, "--") {
				continue
			}
			// The layout statements() relies on: a statement ends at the
			// end of a line, and comments are "--" lines (a ";" inside a
			// line, or a "#" or "/*" comment, would be split wrongly).
			if strings.Contains(strings.TrimSuffix(text, ";"), ";") || strings.HasPrefix(text, "#") || strings.Contains(text, "/*") {
				t.Errorf("%s:%d: %q breaks the migrations' layout (one statement ends a line; comments are -- lines)", name, i+1, l)
			}
			if strings.HasSuffix(text, ";") {
				want++
			}
		}
		got := statements(string(data))
		if len(got) != want || want == 0 {
			t.Errorf("%s: %d statements, want %d:\n%s", name, len(got), want, strings.Join(got, "\n----\n"))
		}
		for _, q := range got {
			if strings.HasSuffix(q, ";") || len(statements(q)) != 1 {
				t.Errorf("%s: statement %q is not one statement", name, q)
			}
		}
	}
}

// TestDDLRenames: DDL(table) renames the election table and the names
// derived from it, and DDL("") is service_election's.
func TestDDLRenames(t *testing.T) {
	d := DDL("jobs")
	if strings.Contains(d, "service_election") || !strings.Contains(d, "CREATE TABLE IF NOT EXISTS jobs (") || !strings.Contains(d, "jobs_floor") {
		t.Errorf("DDL(\"jobs\") does not rename service_election everywhere:\n%s", d)
	}
	if DDL("service_election") != DDL("") || !strings.HasPrefix(DDL(""), "-- 000001_service_election.up.sql\n") {
		t.Errorf("DDL(\"\") is not the migrations as they are:\n%s", DDL(""))
	}
}

// TestLatest: the up migrations are numbered from 1 without a gap, so that
// their number is the latest version.
func TestLatest(t *testing.T) {
	for i, name := range upFiles() {
		if want := fmt.Sprintf("%06d_", i+1); !strings.HasPrefix(name, want) {
			t.Errorf("up migration %d is %s, want a name beginning with %s", i+1, name, want)
		}
	}
	files := upFiles()
	if len(files) == 0 {
		t.Fatal("no up migrations")
	}
	last, err := strconv.ParseUint(strings.SplitN(files[len(files)-1], "_", 2)[0], 10, 64)
	if err != nil || Latest() != uint(last) {
		t.Errorf("Latest() = %d; the last up migration is %s (%v)", Latest(), files[len(files)-1], err)
	}
}
