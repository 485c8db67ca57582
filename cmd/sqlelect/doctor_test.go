package main

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestDoctor: on the CI server doctor exits 0 for both backends and says
// so; --json has the verdict and every property; with a session time zone
// that has daylight saving time it exits 9 and names time_zone; a bad
// --backend is a usage error.
func TestDoctor(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	dsn := migrated(t, ctx)

	for _, backend := range []string{"table", "lock"} {
		r := mustRun(t, ctx, dsn, 0, "doctor", "--backend", backend)
		if !strings.Contains(r.stdout, "verdict: the "+backend+" backend is safe on this server") {
			t.Errorf("doctor --backend %s:\n%s", backend, r)
		}
	}

	r := mustRun(t, ctx, dsn, 0, "doctor", "--json")
	var out struct {
		Server    string           `json:"server"`
		Backend   string           `json:"backend"`
		Safe      bool             `json:"safe"`
		UnsafeFor []string         `json:"unsafe_for"`
		Findings  []doctor.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	if !out.Safe || out.Backend != "table" || out.Server == "" || len(out.UnsafeFor) != 0 || len(out.Findings) < 16 {
		t.Errorf("doctor --json: %+v", out)
	}

	zone := testdb.DSTZone(t, testdb.Open(t, testdb.AdminDSN(t)))
	dst := dsn + "&time_zone=" + url.QueryEscape("'"+zone+"'")
	r = mustRun(t, ctx, dst, exitUnsafe, "doctor")
	if !strings.Contains(r.stdout, "verdict: the table backend is NOT safe on this server: time_zone") ||
		!strings.Contains(r.stdout, "time_zone='+00:00'") {
		t.Errorf("doctor with a DST time zone:\n%s", r)
	}

	mustRun(t, ctx, dsn, exitUsage, "doctor", "--backend", "paxos")
}
