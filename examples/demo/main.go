// Command demo shows a sqlelect election at work on a real database: three
// candidate processes elect a leader, the leader is killed with SIGKILL and
// another takes over after the lease, then the new leader shuts down cleanly
// and hands over at once.
//
// It uses SQLELECT_DSN when set, and otherwise starts a throwaway MariaDB or
// MySQL server from PATH in a temporary directory, removed at the end.
//
//	go run ./examples/demo
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/operator"
	"github.com/sqlelect/sqlelect/schema"
)

const (
	lease         = 2 * time.Second
	renewDeadline = 1200 * time.Millisecond
	renewInterval = 200 * time.Millisecond
	retryInterval = 200 * time.Millisecond
)

// event is one line a candidate process prints.
type event struct {
	Event  string    `json:"event"`
	ID     string    `json:"id"`
	Term   uint64    `json:"term"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason,omitempty"`
	Until  time.Time `json:"until,omitempty"`
}

func main() {
	candidate := flag.String("candidate", "", "internal: run as the candidate with this id")
	dsn := flag.String("dsn", os.Getenv("SQLELECT_DSN"), "database DSN (default: a throwaway server)")
	name := flag.String("election", "demo", "election name")
	flag.Parse()
	if *candidate != "" {
		if err := runCandidate(*dsn, *name, *candidate); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(*dsn, *name); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// runCandidate campaigns and prints one JSON line per event until SIGTERM.
func runCandidate(dsn, name, id string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e event) {
		mu.Lock()
		defer mu.Unlock()
		e.ID, e.Time = id, time.Now()
		_ = enc.Encode(e)
	}
	e, err := election.NewTable(db, election.Config{
		Name: name, ID: id, LeaseDuration: lease, Tuning: election.TuningConfig{RenewDeadline: renewDeadline, RenewInterval: renewInterval, RetryInterval: retryInterval},
		Callbacks: election.Callbacks{
			OnElected: func(ctx context.Context, l election.Leadership) {
				term := l.Term
				emit(event{Event: "elected", Term: term})
				<-ctx.Done()
			},
			OnDemoted: func(d election.Demotion) {
				emit(event{Event: "demoted", Term: d.Term, Reason: string(d.Reason), Until: d.Until})
			},
		},
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	emit(event{Event: "started"})
	return e.Run(ctx)
}

type demo struct {
	start  time.Time
	self   string
	dsn    string
	name   string
	mu     sync.Mutex
	procs  map[string]*exec.Cmd
	events chan event
}

func (d *demo) say(format string, args ...any) {
	fmt.Printf("[+%6.3fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func run(dsn, name string) error {
	d := &demo{start: time.Now(), name: name, procs: map[string]*exec.Cmd{}, events: make(chan event, 64)}
	fmt.Printf("sqlelect demo: election %q, 3 candidate processes, lease %v, renew deadline %v, renewals every %v\n\n",
		name, lease, renewDeadline, renewInterval)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if dsn == "" {
		srv, err := mysqld.Start(ctx, mysqld.Options{})
		if err != nil {
			if errors.Is(err, mysqld.ErrNoServer) {
				return fmt.Errorf("%w\n(`make demo` installs mariadb-server on Debian when run as root)", err)
			}
			return err
		}
		defer srv.Stop()
		admin, err := sql.Open("mysql", srv.DSN(""))
		if err != nil {
			return err
		}
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS sqlelect_demo"); err != nil {
			return err
		}
		admin.Close()
		dsn = srv.DSN("sqlelect_demo")
		d.say("started a throwaway database server on %s (pid %d)", srv.Addr, srv.Pid())
	} else {
		d.say("using SQLELECT_DSN")
	}
	d.dsn = dsn
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	m := schema.New(db)
	if err := m.Up(ctx); err != nil && !errors.Is(err, schema.ErrNoChange) {
		return err
	}
	v, _, _ := m.Version(ctx)
	d.say("migrated the schema to version %d (table service_election)", v)
	op, err := operator.New(db, "") // the operator's view of service_election
	if err != nil {
		return err
	}
	_, _ = op.Reelect(ctx, name) // start from a clean slate
	if d.self, err = os.Executable(); err != nil {
		return err
	}
	defer d.stopAll()

	for _, id := range []string{"node-1", "node-2", "node-3"} {
		if err := d.spawn(id); err != nil {
			return err
		}
	}
	first, err := d.waitElected(ctx, "", 3*lease)
	if err != nil {
		return err
	}
	how := "a new row: it waited out one lease, the lock delay, first"
	if rec, err := op.Status(ctx, name); err == nil && rec.Term == first.Term && rec.Acquired == "first" {
		how = "the election's first term: no lock delay"
	}
	d.say("%s elected, term %d (%s)", first.ID, first.Term, how)
	d.showStatus(ctx, op)

	time.Sleep(2 * time.Second)
	d.say("killing the leader %s with SIGKILL: it cannot resign", first.ID)
	killed := time.Now()
	d.signal(first.ID, syscall.SIGKILL)
	second, err := d.waitElected(ctx, first.ID, 3*lease)
	if err != nil {
		return err
	}
	d.say("%s elected, term %d: takeover %v after the kill (lease %v; ratio %.2f)", second.ID, second.Term,
		second.Time.Sub(killed).Round(time.Millisecond), lease, second.Time.Sub(killed).Seconds()/lease.Seconds())
	d.showStatus(ctx, op)

	time.Sleep(2 * time.Second)
	d.say("stopping the leader %s with SIGTERM: it resigns cleanly", second.ID)
	stopped := time.Now()
	d.signal(second.ID, syscall.SIGTERM)
	third, err := d.waitElected(ctx, second.ID, 3*lease)
	if err != nil {
		return err
	}
	d.say("%s elected, term %d: handover %v after the SIGTERM, without waiting out the lease",
		third.ID, third.Term, third.Time.Sub(stopped).Round(time.Millisecond))
	d.showStatus(ctx, op)
	fmt.Println("\nTerms strictly increased:", first.Term < second.Term && second.Term < third.Term)
	fmt.Println("Every leader stood down before the next one was elected (see the demoted lines).")
	return nil
}

func (d *demo) spawn(id string) error {
	cmd := exec.Command(d.self, "-candidate", id, "-dsn", d.dsn, "-election", d.name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.mu.Lock()
	d.procs[id] = cmd
	d.mu.Unlock()
	d.say("started candidate %s (pid %d)", id, cmd.Process.Pid)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				d.events <- e
			}
		}
		_ = cmd.Wait()
	}()
	return nil
}

// waitElected prints events until a candidate other than except is elected.
func (d *demo) waitElected(ctx context.Context, except string, within time.Duration) (event, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		select {
		case e := <-d.events:
			switch e.Event {
			case "demoted":
				d.say("%s demoted from term %d (%s); it could have believed it led until +%.3fs",
					e.ID, e.Term, e.Reason, e.Until.Sub(d.start).Seconds())
			case "elected":
				if e.ID != except {
					return e, nil
				}
			}
		case <-t.C:
			return event{}, fmt.Errorf("no leader elected within %v", within)
		case <-ctx.Done():
			return event{}, ctx.Err()
		}
	}
}

func (d *demo) showStatus(ctx context.Context, op *operator.Operator) {
	r, err := op.Status(ctx, d.name)
	if err != nil {
		d.say("status: %v", err)
		return
	}
	d.say("the table says: %s leads term %d, lease %v, %v left by the database clock",
		r.ID, r.Term, r.Lease, r.LeaseLeft.Round(time.Millisecond))
}

func (d *demo) signal(id string, sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.procs[id]; p != nil && p.Process != nil {
		_ = p.Process.Signal(sig)
	}
}

func (d *demo) stopAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range d.procs {
		done := make(chan struct{})
		go func() { _, _ = p.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
		}
	}
}
