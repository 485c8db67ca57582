// Command seedcandidate is the seed recipe ("Leader election using MySQL",
// orchestrator's scheme) as published, for the benchmark harness
// (integration/bench) to run beside sqlelect: every candidate issues the
// recipe's INSERT … ON DUPLICATE KEY UPDATE once per interval (1 s) with a
// 20 s timeout, on the recipe's own table, and considers itself leader when
// the row names it afterwards (the recipe's "am I the leader" query). It
// never releases: on SIGTERM it just stops.
//
// It prints the same JSON lines as integration/chaos/candidate
// (started, elected, demoted, exit) with the wall-clock time.
//
//	CREATE TABLE seed_election (
//	  anchor tinyint(3) unsigned NOT NULL,
//	  service_id varchar(128) NOT NULL,
//	  last_seen_active timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
//	  PRIMARY KEY (anchor))
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

type line struct {
	Event string    `json:"event"`
	ID    string    `json:"id"`
	Time  time.Time `json:"time"`
	Pid   int       `json:"pid,omitempty"`
}

func main() {
	dsn := flag.String("dsn", "", "go-sql-driver/mysql DSN (required)")
	id := flag.String("id", "", "service_id (required)")
	interval := flag.Duration("interval", time.Second, "how often every candidate runs the election statement")
	timeout := flag.Int("timeout", 20, "seconds without a heartbeat before another candidate may take over")
	flag.Parse()
	if *dsn == "" || *id == "" {
		fmt.Fprintln(os.Stderr, "seedcandidate: --dsn and --id are required")
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	emit := func(ev string) { _ = enc.Encode(line{Event: ev, ID: *id, Time: time.Now().Round(0), Pid: os.Getpid()}) }
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer db.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// The recipe's statement, verbatim but for the timeout and id.
	attempt := fmt.Sprintf(`insert ignore into seed_election (
	anchor, service_id, last_seen_active
) values (
	1, ?, now()
) on duplicate key update
	service_id = if(last_seen_active < now() - interval %d second, values(service_id), service_id),
	last_seen_active = if(service_id = values(service_id), values(last_seen_active), last_seen_active)`, *timeout)
	const amI = `select count(*) as is_leader from seed_election where anchor=1 and service_id=?`

	emit("started")
	leader := false
	t := time.NewTicker(*interval)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, *interval)
		var n int
		if _, err := db.ExecContext(qctx, attempt, *id); err == nil {
			_ = db.QueryRowContext(qctx, amI, *id).Scan(&n)
		}
		cancel()
		switch {
		case n == 1 && !leader:
			leader = true
			emit("elected")
		case n != 1 && leader:
			leader = false
			emit("demoted")
		}
		select {
		case <-ctx.Done():
			emit("exit")
			return
		case <-t.C:
		}
	}
}
