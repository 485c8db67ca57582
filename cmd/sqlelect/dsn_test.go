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
