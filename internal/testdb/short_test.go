package testdb_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestShortWithoutServerSkipsExamples runs package election's Examples as
// `go test -short` does on a machine with no server (SQLELECT_TEST_DSN
// names a port nothing listens on): they are skipped, not failed.
func TestShortWithoutServerSkipsExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs another test binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-short", "-count=1", "-v", "-run", "^Example", "../../election/")
	cmd.Env = append(os.Environ(), "SQLELECT_TEST_DSN=root@tcp(127.0.0.1:1)/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -short without a server: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-short skips the tests and Examples that need one") {
		t.Fatalf("go test -short without a server did not say it skips the Examples:\n%s", out)
	}
	if strings.Contains(string(out), "--- PASS: Example") {
		t.Fatalf("an Example ran without a server:\n%s", out)
	}
}
