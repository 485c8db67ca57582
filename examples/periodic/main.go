// Command periodic is the cron case: several replicas run the same schedule,
// and each slot of it runs once, on the leader. Every --every the leader
// runs the job in a fenced transaction that first records the run in
// job_runs, whose primary key is the schedule slot: a slot commits at most
// once, even when leadership changes hands in the middle of it (the new
// leader finds the slot taken and skips it), and a deposed leader that has
// not noticed yet commits nothing. Followers skip: only the leader's
// OnElected runs the schedule.
//
// Slots are cut by the database clock, so replicas whose clocks differ
// still agree on them; all replicas must use the same --every. A slot that
// falls while nobody leads (a failover after a crash takes about one lease)
// is skipped, not caught up.
//
// It prints one line per run on stdout and logs in JSON on stderr. It uses
// SQLELECT_DSN when set, and otherwise starts a throwaway MariaDB or MySQL
// server (removed on exit) whose DSN it logs so that more replicas can join:
//
//	go run ./examples/periodic
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/examples/internal/exampledb"
)

type options struct {
	id, election         string
	every, work          time.Duration
	lease, renewDeadline time.Duration
	renew, retry         time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.id, "id", "", "this replica's candidate `ID` (default host:pid:random)")
	flag.StringVar(&o.election, "election", "periodic", "election `name`; also the job's name in job_runs")
	flag.DurationVar(&o.every, "every", 2*time.Second, "the schedule's period (at least 10ms; the same on every replica)")
	flag.DurationVar(&o.work, "work", 50*time.Millisecond, "how long the (simulated) job takes; keep it well under --renew-deadline")
	flag.DurationVar(&o.lease, "lease", 3*time.Second, "lease recorded with each renewal")
	flag.DurationVar(&o.renewDeadline, "renew-deadline", 2*time.Second, "stand down this long after the last successful renewal")
	flag.DurationVar(&o.renew, "renew", 500*time.Millisecond, "interval between the leader's renewals")
	flag.DurationVar(&o.retry, "retry", 500*time.Millisecond, "interval between a follower's looks")
	flag.Parse()
	if o.id == "" {
		o.id = election.DefaultID()
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if o.every < 10*time.Millisecond {
		logger.Error("--every must be at least 10ms")
		os.Exit(2)
	}
	if err := run(o, logger); err != nil {
		logger.Error("periodic failed", "election", o.election, "id", o.id, "err", err)
		os.Exit(1)
	}
}

func run(o options, logger *slog.Logger) error {
	log := logger.With("election", o.election, "id", o.id)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	dsn, cleanup, err := exampledb.DSN(ctx)
	defer cleanup()
	if err != nil {
		return err
	}
	if os.Getenv(exampledb.EnvDSN) == "" {
		log.Info("started a throwaway database server; more replicas can join with this DSN",
			"dsn", dsn, "try", fmt.Sprintf("SQLELECT_DSN='%s' go run ./examples/periodic", dsn))
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	// slot is the start of the schedule slot in Unix milliseconds by the
	// database clock; the primary key lets a slot commit once.
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS job_runs (
		job VARCHAR(128) NOT NULL,
		slot BIGINT NOT NULL,
		term BIGINT UNSIGNED NOT NULL,
		who VARCHAR(255) NOT NULL,
		ran_at DATETIME(6) NOT NULL,
		PRIMARY KEY (job, slot)) ENGINE=InnoDB`); err != nil {
		return fmt.Errorf("create job_runs: %w", err)
	}

	e, err := election.NewTable(db, election.Config{
		Name: o.election, ID: o.id, LeaseDuration: o.lease,
		Tuning: election.TuningConfig{RenewDeadline: o.renewDeadline, RenewInterval: o.renew, RetryInterval: o.retry, Logger: logger},
		Callbacks: election.Callbacks{
			OnElected: func(ctx context.Context, l election.Leadership) {
				schedule(ctx, l, o, log.With("term", l.Term))
			},
			OnLeaderChanged: func(r election.Record) {
				if r.ID != "" && r.ID != o.id {
					log.Info("following: another replica runs the schedule", "leader", r.ID)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	log.Info("campaigning", "every", o.every.String())
	return e.Run(ctx) // resigns on SIGTERM/SIGINT: another replica takes over at once
}

// errSlotTaken means the slot already ran (on an earlier leader, or on this
// one before a retry).
var errSlotTaken = errors.New("slot already ran")

// schedule runs the job once per slot while this replica leads.
func schedule(ctx context.Context, l election.Leadership, o options, log *slog.Logger) {
	log.Info("leading: running the schedule")
	defer log.Info("leadership ended: schedule stopped")
	period := o.every.Milliseconds()
	for ctx.Err() == nil {
		var slot, nowMS int64
		start := time.Now()
		err := l.Fenced(ctx, func(tx *sql.Tx) error {
			// The database clock cuts the slots: every replica agrees.
			if err := tx.QueryRowContext(ctx, "SELECT FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000)").Scan(&nowMS); err != nil {
				return err
			}
			slot = nowMS - nowMS%period
			// Claim the slot first: a slot that already ran fails here.
			_, err := tx.ExecContext(ctx, "INSERT INTO job_runs (job, slot, term, who, ran_at) VALUES (?, ?, ?, ?, NOW(6))",
				o.election, slot, l.Term, o.id)
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1062 { // ER_DUP_ENTRY
				return errSlotTaken
			}
			if err != nil {
				return err
			}
			return job(ctx, tx, o.work) // the job's own writes go through tx: fenced too
		})
		wait := time.Duration(period-(nowMS-slot)) * time.Millisecond // to the next slot
		switch {
		case err == nil:
			fmt.Printf("run slot=%s id=%s term=%d took=%s\n",
				time.UnixMilli(slot).UTC().Format("2006-01-02T15:04:05.000Z"), o.id, l.Term, time.Since(start).Round(time.Millisecond))
		case errors.Is(err, errSlotTaken):
			log.Info("slot already ran: skipped", "slot", time.UnixMilli(slot).UTC())
		case errors.Is(err, election.ErrNotLeader):
			log.Warn("run refused: no longer the leader", "err", err)
			wait = o.retry // leadership is ending: ctx will be cancelled
		case ctx.Err() != nil:
			return // leadership ended during the run: rolled back
		default:
			log.Warn("run failed; retrying the slot", "err", err)
			wait = min(wait, o.retry)
		}
		t := time.NewTimer(wait + 5*time.Millisecond) // a little past the boundary
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// job stands for the real work: here it waits d, like a short batch would.
func job(ctx context.Context, _ *sql.Tx, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
