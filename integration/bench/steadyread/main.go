// Command steadyread measures what one shard-group process and its server
// spend in a steady state (BENCHMARKS.md, "Shard groups": a steady
// balancing's read): it starts a throwaway server, joins a group of -n
// shards alone (lease -lease, balancing every -interval), waits until it
// leads them all and -settle more, then reports the process's and the
// server's CPU over -window, in cores. Run it on two commits to compare.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/bench/scaleload"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/schema"
	"github.com/sqlelect/sqlelect/shards"
)

func main() {
	n := flag.Int("n", 50000, "shards")
	lease := flag.Duration("lease", time.Minute, "the shards' lease (renewals every 2/15 of it)")
	interval := flag.Duration("interval", 2*time.Second, "the group's balancing interval")
	settle := flag.Duration("settle", 10*time.Second, "wait after every shard is led")
	window := flag.Duration("window", 30*time.Second, "measured window")
	flag.Parse()
	if err := run(*n, *lease, *interval, *settle, *window); err != nil {
		fmt.Fprintln(os.Stderr, "steadyread:", err)
		os.Exit(1)
	}
}

func run(n int, lease, interval, settle, window time.Duration) error {
	ctx := context.Background()
	srv, err := mysqld.Start(ctx, mysqld.Options{})
	if err != nil {
		return err
	}
	defer srv.Stop() //nolint:errcheck // a throwaway server
	root, err := sql.Open("mysql", srv.DSN(""))
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE bench"); err != nil {
		return err
	}
	db, err := sql.Open("mysql", srv.DSN("bench"))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(20) // as sqlelect shards
	db.SetMaxIdleConns(20)
	if err := schema.New(db).Up(ctx); err != nil {
		return err
	}
	time.Sleep(lease) // the floor's marker a lock delay old, as after a deployment's migrations
	var led atomic.Int64
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- shards.Run(gctx, db, shards.Options{Group: "orders", Shards: n, Interval: interval,
			Config:    election.Config{ID: "p1", LeaseDuration: lease, Tuning: election.TuningConfig{Logger: slog.New(slog.DiscardHandler)}},
			OnElected: func(context.Context, string, election.Leadership) { led.Add(1) },
			OnDemoted: func(string, election.Demotion) { led.Add(-1) }})
	}()
	start := time.Now()
	for led.Load() < int64(n) {
		select {
		case err := <-done:
			return fmt.Errorf("the group ended: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	up := time.Since(start)
	time.Sleep(settle)
	p0, s0 := scaleload.ProcCPU(os.Getpid()), scaleload.ProcCPU(srv.Pid())
	time.Sleep(window)
	p1, s1 := scaleload.ProcCPU(os.Getpid()), scaleload.ProcCPU(srv.Pid())
	fmt.Printf("%d shards, lease %v, balancing every %v: up in %v; over %v: %d led, process %.3f cores, server %.3f cores\n",
		n, lease, interval, up.Round(time.Millisecond), window, led.Load(), (p1-p0)/window.Seconds(), (s1-s0)/window.Seconds())
	cancel()
	return <-done
}
