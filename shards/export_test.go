package shards

import (
	"context"
	"database/sql"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// Plan is plan, for the tests.
var Plan = plan

// MaxPending is maxPending, for the tests.
const MaxPending = maxPending

// Holders is each shard's holder (by key) as member id of group name reads it
// (group.read).
func Holders(ctx context.Context, db *sql.DB, table, name, id string) (map[string]string, error) {
	g := &group{db: db, o: Options{Group: name}, cfg: election.Config{ID: id, Table: table}, joined: true, timeout: 5 * time.Second}
	_, _, holders, err := g.read(ctx)
	return holders, err
}
