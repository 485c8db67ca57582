package election

import (
	"context"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/testdb"
)

// BenchmarkHeartbeatRenew is a holder's renewal on the table backend, on a
// real server (the one testdb starts): heartbeatOnce, which since the term
// floor (migration 6) runs the heartbeat in a transaction with the floor
// row, after a renewal in one statement (tableStmts.renew). "follower" is a
// heartbeat that changes nothing, in the floor's transaction; "statement"
// the heartbeat statement alone, as it ran before.
//
//	go test -run XXX -bench HeartbeatRenew ./election/
func BenchmarkHeartbeatRenew(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsn := testdb.DSN(b)
	testdb.Migrate(b, dsn)
	db := testdb.Open(b, dsn)
	e, err := NewTable(db, Config{Name: "bench", ID: "me", Tuning: TuningConfig{DisableFastHandover: true}})
	if err != nil {
		b.Fatal(err)
	}
	tb := backendOf(e).(*tableBackend)
	if _, err := tb.preflight(ctx); err != nil {
		b.Fatal(err)
	}
	first, err := tb.heartbeatOnce(ctx, 0)
	if err != nil || !first.held {
		b.Fatalf("first heartbeat: %+v, %v", first, err)
	}
	b.Run("heartbeatOnce", func(b *testing.B) {
		for b.Loop() {
			qctx, qcancel := context.WithTimeout(ctx, time.Second)
			bt, err := tb.heartbeatOnce(qctx, first.term)
			qcancel()
			if err != nil || !bt.held || bt.term != first.term {
				b.Fatalf("renewal: %+v, %v", bt, err)
			}
		}
	})
	// A follower's heartbeat on a row another candidate holds live: it
	// changes nothing (the decision of a take, without the take); since the
	// term floor a transaction.
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, lease_ms)
VALUES ('bench-other', 'other', NOW(6) + INTERVAL 1 HOUR, 15000)`); err != nil {
		b.Fatal(err)
	}
	f, err := NewTable(db, Config{Name: "bench-other", ID: "me", Tuning: TuningConfig{DisableFastHandover: true}})
	if err != nil {
		b.Fatal(err)
	}
	fb := backendOf(f).(*tableBackend)
	if _, err := fb.preflight(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("follower", func(b *testing.B) {
		for b.Loop() {
			qctx, qcancel := context.WithTimeout(ctx, time.Second)
			bt, err := fb.heartbeatOnce(qctx, 0)
			qcancel()
			if err != nil || bt.held {
				b.Fatalf("follower: %+v, %v", bt, err)
			}
		}
	})
	b.Run("statement", func(b *testing.B) {
		for b.Loop() {
			qctx, qcancel := context.WithTimeout(ctx, time.Second)
			res, err := tb.stmts.heartbeat.Exec(qctx, tb.db, tb.params(first.term))
			qcancel()
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 2 {
				b.Fatalf("renewal: %d affected rows", n)
			}
		}
	})
}
