package main

import (
	"errors"
	"strings"
	"testing"
)

func TestDSNRefusesJDBCOptions(t *testing.T) {
	tests := []struct {
		dsn, want string // want: "" for accepted
	}{
		{"u:p@tcp(127.0.0.1:3306)/app", ""},
		{"u:p@tcp(127.0.0.1:3306)/app?tls=skip-verify&parseTime=true", ""},
		{"u:p@tcp(127.0.0.1:3306)/app?allowPublicKeyRetrieval=true", "allowPublicKeyRetrieval is a JDBC option"},
		{"u:p@tcp(127.0.0.1:3306)/app?useSSL=false", "use tls="},
		{"u:p@tcp(127.0.0.1:3306)/app?serverTimezone=UTC", "loc=UTC"},
		// golang-migrate's URL, and a plain URL: say what to pass instead.
		{"mysql://u:secret@tcp(127.0.0.1:3306)/app", "is a URL (mysql://…); sqlelect takes a go-sql-driver/mysql DSN, user:pass@tcp(host:3306)/db?param=value: here u:***@tcp(127.0.0.1:3306)/app"},
		{"mysql://u:secret@db.example:3306/app?tls=true", "here u:***@tcp(db.example:3306)/app?tls=true"},
		{"mariadb://db/app", "is a URL (mariadb://…)"},
		// An address without tcp(), and a duration that is not one.
		{"u:p@127.0.0.1:3306/app", "must be written as tcp(host:port)"},
		{"u:p@tcp(127.0.0.1:3306)/app?timeout=abc", "the DSN's timeout=abc is not a duration"},
		{"u:p@tcp(127.0.0.1:3306)/app?readTimeout=5", "the DSN's readTimeout=5 is not a duration"},
	}
	for _, tc := range tests {
		t.Run(tc.dsn, func(t *testing.T) {
			co := common{dsn: tc.dsn, table: "service_election"}
			_, _, err := co.dsnConfig()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			case tc.want != "":
				var e *exitErr
				if !errors.As(err, &e) || e.code != exitUsage {
					t.Fatalf("error %v is not a usage error (exit %d)", err, exitUsage)
				}
			}
		})
	}
}
