package shards

import (
	"context"
	"database/sql"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/balance"
)

// Plan is plan's part for member me, for the tests.
func Plan(me string, keys, live []string, listed map[string]bool, holders map[string]string) (map[string]bool, []balance.Move) {
	want, gives, _ := plan(me, keys, live, listed, holders)
	return want, gives
}

// MaxPending is maxPending, for the tests.
const MaxPending = maxPending

// Reader reads group name as member id would, for the tests.
type Reader struct{ g *group }

// NewReader returns a Reader of the group name of shards keys "0" to
// "shards-1" in table, as member id (which runs no candidate), with the
// shards' lease.
func NewReader(db *sql.DB, table, name, id string, shards int, lease time.Duration) *Reader {
	cfg, _ := election.Config{Name: name}.WithDefaults()
	o := Options{Group: name, Shards: shards}
	keys, isKey, _ := o.keys()
	return &Reader{&group{db: db, o: o, cfg: election.Config{ID: id, Table: table, LeaseDuration: lease}, keys: keys, isKey: isKey,
		joined: true, timeout: 5 * time.Second, clock: cfg.Tuning.Clock, run: map[string]*shard{}}}
}

// Full reads each shard's holder (by key) as a balancing does
// (group.read), and remembers the group if steady (group.remember).
func (r *Reader) Full(ctx context.Context) (map[string]string, error) {
	start := r.g.clock.Now()
	live, _, holders, p, err := r.g.read(ctx, false)
	if err == nil {
		r.g.remember(start, holders, p, len(balance.Plan(r.g.keys, live, holders)) == 0)
	}
	return holders, err
}

// Skips reports whether the next balancing would not read the holders
// (group.unchanged).
func (r *Reader) Skips(ctx context.Context) (bool, error) {
	_, _, holders, _, err := r.g.read(ctx, true)
	return holders == nil, err
}
