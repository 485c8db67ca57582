package main

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/history"
	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/members"
)

var uiCmd = &command{
	name:    "ui",
	args:    "[--listen 127.0.0.1:8080]",
	summary: "serve a read-only web page of every election in the table",
	detail: `Serves one page, at / on --listen, of every election in --table: the leader,
its term and the lease left (or no leader); the members (see 'sqlelect
members'); and a timeline of the last 20 terms of the last 24 hours from the
history (migration 10), each a bar from its start to its end, with how it
began and ended. The page refreshes itself every 2 seconds, without
JavaScript, and reads the database with SELECTs only: a user with SELECT
on the tables is enough. A members or history table that is missing (an
older schema) is a note on the page.

--listen is loopback by default; another address works, with a warning on
stderr: the page has no authentication. The address served is printed on
stdout. Runs until SIGINT or SIGTERM (exit 0).`,
	example: `sqlelect ui                              # then open http://127.0.0.1:8080
sqlelect ui --listen 127.0.0.1:9000 --table jobs_election`,
	run: (*cli).ui,
}

// uiTerms and uiSpan bound the history a timeline shows.
const (
	uiTerms = 20
	uiSpan  = 24 * time.Hour
)

//go:embed ui.html
var uiHTML string

var uiTemplate = template.Must(template.New("ui").Funcs(template.FuncMap{"time": fmtTime}).Parse(uiHTML))

func (c *cli) ui(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	addr := fs.String("listen", "127.0.0.1:8080", "`address` to serve the page on, [HOST]:PORT")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return failf(exitUsage, "ui takes no arguments (see 'sqlelect ui --help')")
	}
	if err := checkAddr("--listen", *addr); err != nil {
		return err
	}
	ctx, stop := signalContext(context.Background())
	defer stop()
	db, err := co.connect(ctx, nil)
	if err == nil {
		defer db.Close()
		// No table, no privilege: say so now rather than on the page.
		_, err = listRecords(ctx, db, co.table)
	}
	if ctx.Err() != nil {
		return interruptStatus(ctx)
	}
	if err != nil {
		return err
	}
	ep, err := listen("--listen", *addr)
	if err != nil {
		return err
	}
	if ip := ep.ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		fmt.Fprintf(c.stderr, "warning: --listen %s is not a loopback address: anyone who reaches it sees the page, which has no authentication\n", *addr)
	}
	ep.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = uiTemplate.Execute(w, readPage(r.Context(), db, co.table))
	})
	ep.done = make(chan struct{})
	go func() {
		defer close(ep.done)
		_ = ep.srv.Serve(ep.ln)
	}()
	fmt.Fprintf(c.stdout, "serving http://%s\n", ep.ln.Addr())
	<-ctx.Done()
	(&sidecar{http: ep, started: true}).close() // requests in flight get shutdownTimeout
	return nil
}

// uiPage is what the page shows.
type uiPage struct {
	Table     string
	Now       time.Time // the database clock
	Err       string
	Elections []uiElection
}

type uiElection struct {
	election.Record
	State, LeaseLeft string
	Members          []uiMember
	MembersNote      string
	Terms            []uiTerm
	HistoryNote      string
}

type uiMember struct {
	members.Member
	State, Seen string
}

type uiTerm struct {
	history.Term
	End, Duration string
	Left, Width   string // the bar's place in the timeline, in percent
}

// readPage reads the database clock, then every election, its members and
// its history, all within queryTimeout.
func readPage(ctx context.Context, db *sql.DB, table string) uiPage {
	p := uiPage{Table: table}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var now int64
	err := db.QueryRowContext(ctx, `SELECT `+dbclock.TermNow).Scan(&now)
	var recs []election.Record
	if err == nil {
		recs, err = listRecords(ctx, db, table)
	}
	if err != nil {
		p.Err = err.Error()
		return p
	}
	p.Now = time.UnixMicro(now)
	for _, r := range recs {
		e := uiElection{Record: r, State: state(r), LeaseLeft: r.LeaseLeft.Round(time.Millisecond).String()}
		ms, err := members.List(ctx, db, table, r.Election)
		switch {
		case errors.Is(err, election.ErrTableMissing):
			e.MembersNote = fmt.Sprintf("no members table (migration %d: run `sqlelect migrate up`)", membersMigration)
		case err != nil:
			e.MembersNote = err.Error()
		}
		for _, m := range ms {
			um := uiMember{Member: m, State: "gone", Seen: fmtTime(m.LastSeen)}
			if m.Live {
				um.State, um.Seen = "live", p.Now.Sub(m.LastSeen).Round(time.Second).String()+" ago"
			}
			e.Members = append(e.Members, um)
		}
		e.Terms, e.HistoryNote = readTimeline(ctx, db, table, r.Election, p.Now)
		p.Elections = append(p.Elections, e)
	}
	return p
}

// readTimeline reads the last uiTerms terms of election name within uiSpan
// of now (ctx has a deadline) and places each on a timeline that ends at now; or it returns a
// note saying why it cannot.
func readTimeline(ctx context.Context, db *sql.DB, table, name string, now time.Time) ([]uiTerm, string) {
	ts, err := history.List(ctx, db, table, name, now.Add(-uiSpan))
	switch {
	case errors.Is(err, election.ErrTableMissing):
		return nil, "no history table (migration 10: run `sqlelect migrate up`)"
	case err != nil:
		return nil, err.Error()
	case len(ts) == 0:
		return nil, "no terms in the history in the last 24h"
	}
	ts = ts[max(0, len(ts)-uiTerms):]
	from := ts[0].Started
	if from.Before(now.Add(-uiSpan)) {
		from = now.Add(-uiSpan)
	}
	span := max(now.Sub(from), time.Millisecond)
	pct := func(d time.Duration) string { return fmt.Sprintf("%.2f", 100*float64(d)/float64(span)) }
	var out []uiTerm
	for i, t := range ts {
		end, how := t.Ended, t.End
		switch {
		case end.IsZero() && i+1 < len(ts):
			end, how = ts[i+1].Started, "unknown"
		case end.IsZero():
			end, how = now, "running"
		}
		start := t.Started
		if start.Before(from) {
			start = from
		}
		out = append(out, uiTerm{Term: t, End: how, Duration: end.Sub(t.Started).Round(time.Millisecond).String(),
			Left: pct(start.Sub(from)), Width: pct(max(end.Sub(start), span/500))})
	}
	return out, ""
}
