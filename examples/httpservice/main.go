// Command httpservice is an orchestrator-style service embedding sqlelect:
// run several replicas behind a load balancer on one database; exactly one
// leads and runs the leader-only work loop, whose writes are fenced.
//
// Endpoints:
//
//	/api/leader-check  200 on the leader, --not-leader-status elsewhere (for load balancers)
//	/api/status        JSON: this replica's view and who leads, by the database
//	/metrics           Prometheus: sqlelect_* (electionprom.NewMetrics) and this service's own
//	/healthz           200 while the process runs (liveness, whatever its role)
//
// While it leads, a replica writes one row into app_jobs every --work-every
// through election.Fenced: a deposed leader that has not noticed yet cannot
// write. On SIGTERM or SIGINT it stops serving (http.Server.Shutdown), then
// ends the campaign: the library resigns and another replica takes over at
// once, without waiting out the lease.
//
// It uses SQLELECT_DSN when set, and otherwise starts a throwaway MariaDB or
// MySQL server (removed on exit) and logs its DSN so that more replicas can
// join:
//
//	go run ./examples/httpservice
//	SQLELECT_DSN='root@tcp(127.0.0.1:PORT)/sqlelect_examples' go run ./examples/httpservice --listen 127.0.0.1:8081
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionhttp"
	"github.com/sqlelect/sqlelect/election/electionprom"
	"github.com/sqlelect/sqlelect/examples/internal/exampledb"
)

type options struct {
	listen, id, election string
	lease, renewDeadline time.Duration
	renew, retry         time.Duration
	workEvery            time.Duration
	notLeaderStatus      int
}

func main() {
	var o options
	flag.StringVar(&o.listen, "listen", "127.0.0.1:8080", "HTTP listen `address` (port 0 picks a free one; see the \"listening\" log line)")
	flag.StringVar(&o.id, "id", "", "this replica's candidate `ID`, unique among the replicas (default host:pid:random)")
	flag.StringVar(&o.election, "election", "httpservice", "election `name`")
	flag.DurationVar(&o.lease, "lease", 3*time.Second, "lease recorded with each renewal")
	flag.DurationVar(&o.renewDeadline, "renew-deadline", 2*time.Second, "stand down this long after the last successful renewal")
	flag.DurationVar(&o.renew, "renew", 500*time.Millisecond, "interval between the leader's renewals")
	flag.DurationVar(&o.retry, "retry", 500*time.Millisecond, "interval between a follower's looks")
	flag.DurationVar(&o.workEvery, "work-every", 500*time.Millisecond, "interval between the leader's fenced writes")
	flag.IntVar(&o.notLeaderStatus, "not-leader-status", http.StatusNotFound, "HTTP status of /api/leader-check on a replica that does not lead")
	logLevel := flag.String("log-level", "info", "log level: debug, info, warn or error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "httpservice: --log-level:", err)
		os.Exit(2)
	}
	if o.id == "" {
		o.id = election.DefaultID()
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := run(o, logger); err != nil {
		logger.Error("httpservice failed", "election", o.election, "id", o.id, "err", err)
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
			"dsn", dsn, "try", fmt.Sprintf("SQLELECT_DSN='%s' go run ./examples/httpservice --listen 127.0.0.1:8081", dsn))
	}
	db, err := sql.Open("mysql", dsn) // the library never opens or closes it
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS app_jobs (
		id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		term BIGINT UNSIGNED NOT NULL,
		who VARCHAR(255) NOT NULL,
		at DATETIME(6) NOT NULL,
		KEY (term)) ENGINE=InnoDB`); err != nil {
		return fmt.Errorf("create app_jobs: %w", err)
	}

	// Listen first: the bound address is the value the leader publishes.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()

	// A registry of our own, no global state: the election's collector, the
	// Go and process collectors, and a counter of this service.
	reg := prometheus.NewRegistry()
	metrics := electionprom.NewMetrics()
	writes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "httpservice_fenced_writes_total",
		Help: "Fenced writes of the leader-only work loop, by result (ok, not_leader, error).",
	}, []string{"result"})
	reg.MustRegister(metrics, writes, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	e, err := election.NewTable(db, election.Config{
		Name:          o.election,
		ID:            o.id,
		Value:         addr, // who leads, and where: in /api/status and the table
		LeaseDuration: o.lease,
		Tuning:        election.TuningConfig{RenewDeadline: o.renewDeadline, RenewInterval: o.renew, RetryInterval: o.retry, Logger: logger},
		Metrics:       metrics,
		Callbacks: election.Callbacks{
			OnElected: func(ctx context.Context, l election.Leadership) {
				work(ctx, l, o, log.With("term", l.Term), writes)
			},
			OnLeaderChanged: func(r election.Record) {
				if r.ID == "" {
					log.Info("nobody leads")
					return
				}
				log.Info("leader changed", "leader", r.ID, "leader_term", r.Term, "leader_addr", r.Value)
			},
		},
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/api/leader-check", electionhttp.LeaderCheckHandler(e, o.notLeaderStatus))
	mux.Handle("/api/status", electionhttp.StatusHandler(e))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", addr)

	// Run's context is not the signal context: on a signal, stop serving
	// first, then end the campaign.
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	runErr := make(chan error, 1)
	go func() { runErr <- e.Run(runCtx) }()

	select {
	case <-ctx.Done():
		log.Info("signal: shutting down", "leader", e.IsLeader())
	case err := <-runErr: // a permanent error: missing table, privileges…
		shutdown(srv, log)
		return err
	case err := <-serveErr:
		cancelRun()
		<-runErr
		return err
	}
	shutdown(srv, log)
	cancelRun() // Run stands down (OnElected returns), releases the row and returns
	if err := <-runErr; err != nil {
		return err
	}
	log.Info("stopped; the election was released if this replica led")
	return nil
}

func shutdown(srv *http.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
}

// work is the leader-only loop: it runs while this replica leads and returns
// when ctx (the leadership) ends. Each write goes through l.Fenced, in a
// transaction that first checks, under a share lock on the election's row,
// that this replica still leads with this term.
func work(ctx context.Context, l election.Leadership, o options, log *slog.Logger, writes *prometheus.CounterVec) {
	log.Info("leading: work loop started")
	t := time.NewTicker(o.workEvery)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			log.Info("leadership ended: work loop stopped", "writes", n)
			return
		case <-t.C:
		}
		err := l.Fenced(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO app_jobs (term, who, at) VALUES (?, ?, NOW(6))", l.Term, o.id)
			return err
		})
		switch {
		case err == nil:
			n++
			writes.WithLabelValues("ok").Inc()
			log.Debug("fenced write", "n", n)
		case errors.Is(err, election.ErrNotLeader):
			writes.WithLabelValues("not_leader").Inc()
			log.Warn("fenced write refused: no longer the leader", "err", err)
		case ctx.Err() != nil:
			// Leadership ended during the write: it was rolled back.
		default:
			writes.WithLabelValues("error").Inc()
			log.Warn("fenced write failed", "err", err)
		}
	}
}
