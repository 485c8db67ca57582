// Command shards is a shard group: several replicas share --shards shards
// (queue partitions, tenants, ...), and each leads its fair share, moved
// by transfer when a replica joins or leaves, taken after the lease when
// one dies. Each shard is an election of its own: its leader works on it
// in fenced transactions, so that a replica that lost a shard and has not
// noticed yet writes nothing. Here the work is a row in shard_work per
// shard and tick, stamped with the shard's fencing term.
//
// It prints a line when it begins to lead a shard and when it stops, and
// logs in JSON on stderr. It uses SQLELECT_DSN when set, and otherwise
// starts a throwaway MariaDB or MySQL server (removed on exit) whose DSN it
// logs so that more replicas can join:
//
//	go run ./examples/shards --id a
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/examples/internal/exampledb"
	"github.com/sqlelect/sqlelect/shards"
)

func main() {
	id := flag.String("id", "", "this replica's `ID` (default host:pid:random)")
	group := flag.String("group", "jobs", "the shard group's `name`")
	count := flag.Int("shards", 6, "the number of shards (the same on every replica)")
	lease := flag.Duration("lease", 3*time.Second, "each shard's lease")
	flag.Parse()
	if *id == "" {
		*id = election.DefaultID()
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(*id, *group, *count, *lease, logger); err != nil {
		logger.Error("shards failed", "group", *group, "id", *id, "err", err)
		os.Exit(1)
	}
}

func run(id, group string, count int, lease time.Duration, logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dsn, cleanup, err := exampledb.DSN(ctx)
	defer cleanup()
	if err != nil {
		return err
	}
	if os.Getenv(exampledb.EnvDSN) == "" {
		logger.Info("started a throwaway database server; more replicas can join with this DSN",
			"dsn", dsn, "try", fmt.Sprintf("SQLELECT_DSN='%s' go run ./examples/shards --id b", dsn))
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS shard_work (
		shard VARCHAR(64) NOT NULL, term BIGINT UNSIGNED NOT NULL, who VARCHAR(255) NOT NULL,
		at DATETIME(6) NOT NULL, KEY (shard, term)) ENGINE=InnoDB`); err != nil {
		return fmt.Errorf("create shard_work: %w", err)
	}
	logger.Info("joining", "group", group, "id", id, "shards", count)
	return shards.Run(ctx, db, shards.Options{
		Group: group, Shards: count,
		Config: election.Config{ID: id, LeaseDuration: lease, Tuning: election.TuningConfig{Logger: logger}},
		// Each shard's leadership: work until its context ends (the shard
		// moved, its lease ran out, or the replica stops).
		OnElected: func(ctx context.Context, shard string, l election.Leadership) {
			fmt.Printf("lead shard=%s id=%s term=%d\n", shard, id, l.Term)
			defer fmt.Printf("drop shard=%s id=%s term=%d\n", shard, id, l.Term)
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				err := l.Fenced(ctx, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO shard_work VALUES (?, ?, ?, NOW(6))", shard, l.Term, id)
					return err
				})
				if err != nil && ctx.Err() == nil {
					logger.Warn("work failed", "shard", shard, "term", l.Term, "err", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		},
	})
}
