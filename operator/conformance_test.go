package operator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestOperatorConformance holds the operators' statements to what their
// documentation says on a real server: Assume names a candidate with a higher term
// on a live or an expired row; Reelect deletes the row; Transfer and
// StepDown write transfer_to on a live row only.
func TestOperatorConformance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	op := ops(db)
	row := func(name string, ago int) uint64 {
		t.Helper()
		if _, err := db.ExecContext(ctx, `REPLACE INTO service_election (anchor, service_id, term, last_seen_active, lease_ms, acquired)
  VALUES (?, 'old', 5000000000000000, NOW(6) - INTERVAL ? * 1000 MICROSECOND, 10000, 'expired')`, name, ago); err != nil {
			t.Fatal(err)
		}
		return 5000000000000000
	}
	for _, ago := range []int{1000, 20000} { // live, expired
		name := fmt.Sprintf("op-%d", ago)
		old := row(name, ago)
		rec, err := op.Assume(ctx, name, "new")
		if err != nil || rec.ID != "new" || rec.Term <= old {
			t.Errorf("Assume over a row %d ms old: %+v, %v; want new with a term above %d", ago, rec, err, old)
		}
		row(name, ago)
		rec, err = op.Transfer(ctx, name, "target")
		if ago < 10000 && (err != nil || !rec.Transfer || rec.TransferTo != "target") {
			t.Errorf("Transfer on a live row: %+v, %v", rec, err)
		}
		if ago > 10000 && !errors.Is(err, election.ErrNoLeader) {
			t.Errorf("Transfer on an expired row: %+v, %v; want election.ErrNoLeader", rec, err)
		}
		row(name, ago)
		rec, err = op.StepDown(ctx, name)
		if ago < 10000 && (err != nil || !rec.Transfer || rec.TransferTo != "") {
			t.Errorf("StepDown on a live row: %+v, %v", rec, err)
		}
		if _, err := op.Reelect(ctx, name); err != nil && !errors.Is(err, election.ErrNoLeader) {
			t.Errorf("Reelect: %v", err)
		}
		if _, err := op.Status(ctx, name); !errors.Is(err, election.ErrNoSuchElection) {
			t.Errorf("after Reelect: %v, want election.ErrNoSuchElection", err)
		}
	}
}
