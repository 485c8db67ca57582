package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Application session state on the pool (the chaos fault class
// session_state, see sessionstate_test.go): on SIGUSR2, the candidate acts
// as application code that shares its *sql.DB would. It reads statements,
// one a line, from --session-state-file (SET @@timestamp = …, SET
// time_zone = …), runs them on every idle connection of its pool (at least
// one) and returns those connections to the pool with the state left on
// them, where the library's next statements find them:
//
//	{"event":"session_state","id":"c1.1","time":"…","detail":"conns [12 13]: SET …"}
//
// --session-state-for later it KILLs those connections (its own: no
// privilege needed), so that the state does not outlive the fault, and
// prints session_state_cleared.

// watchSessionState handles SIGUSR2 until ctx ends; file "" turns it off.
func watchSessionState(ctx context.Context, p *printer, db *sql.DB, file string, hold time.Duration, campaigning func() bool) {
	if file == "" {
		return
	}
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	go func() {
		defer signal.Stop(usr2)
		for {
			select {
			case <-ctx.Done():
				return
			case <-usr2:
				if !campaigning() {
					// Still in Run's preflight, which refuses such state
					// at once (Run's error: the candidate exits): the fault
					// is application code that leaves it on a running
					// candidate's pool.
					p.emit(line{Event: "session_state", Detail: "not left: Run's preflight has not passed yet"})
					continue
				}
				leaveSessionState(ctx, p, db, file, hold)
			}
		}
	}()
}

func leaveSessionState(ctx context.Context, p *printer, db *sql.DB, file string, hold time.Duration) {
	b, err := os.ReadFile(file)
	if err != nil {
		p.emit(line{Event: "session_state", Detail: err.Error()})
		return
	}
	var stmts []string
	for _, s := range strings.Split(string(b), "\n") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Take every idle connection at once, so that each is a different one.
	n := max(db.Stats().Idle, 1)
	var conns []*sql.Conn
	var ids []int64
	for range n {
		conn, err := db.Conn(tctx)
		if err != nil {
			break
		}
		conns = append(conns, conn)
		var id int64
		if err := conn.QueryRowContext(tctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
			continue
		}
		for _, s := range stmts {
			if _, err = conn.ExecContext(tctx, s); err != nil {
				break
			}
		}
		if err == nil {
			ids = append(ids, id)
		}
	}
	for _, conn := range conns {
		_ = conn.Close() // back to the pool, state and all
	}
	p.emit(line{Event: "session_state", Detail: fmt.Sprintf("conns %v: %s", ids, strings.Join(stmts, "; "))})
	select {
	case <-time.After(hold):
	case <-ctx.Done():
		return
	}
	kctx, kcancel := context.WithTimeout(ctx, 5*time.Second)
	defer kcancel()
	for _, id := range ids {
		_, _ = db.ExecContext(kctx, fmt.Sprintf("KILL CONNECTION %d", id))
	}
	p.emit(line{Event: "session_state_cleared", Detail: fmt.Sprint(ids)})
}
