package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// LeaderCheckHandler returns an http.Handler for load balancers, like
// orchestrator's /api/leader-check: it answers 200 "leader" while e leads,
// and notLeaderStatus (404 when 0) with "not leader" elsewhere. It reads only
// IsLeader: no database call. Safe for concurrent use.
func LeaderCheckHandler(e Election, notLeaderStatus int) http.Handler {
	if notLeaderStatus == 0 {
		notLeaderStatus = http.StatusNotFound
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if e.IsLeader() {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("leader\n"))
			return
		}
		w.WriteHeader(notLeaderStatus)
		_, _ = w.Write([]byte("not leader\n"))
	})
}

// StatusJSON is the body StatusHandler serves.
type StatusJSON struct {
	Election string `json:"election"`
	ID       string `json:"id"`
	IsLeader bool   `json:"is_leader"`
	Term     uint64 `json:"term"`
	// Healthy is, with Config.Health.Check, whether the check's last run
	// passed (true before its first run), as sqlelect_healthy; nil (left
	// out of the JSON) without a HealthCheck.
	Healthy *bool `json:"healthy,omitempty"`
	// Wedged is true while Run runs but its campaign loop has made no
	// progress for more than RenewDeadline past when it was due, as
	// sqlelect_wedged and HealthzHandler's 503; false when Run does not
	// run.
	Wedged bool    `json:"wedged"`
	Leader *Record `json:"leader"` // nil when nobody leads
	Error  string  `json:"error,omitempty"`
}

// StatusHandler returns an http.Handler serving a JSON StatusJSON: this
// candidate's view (leadership, and the elector's health as electionprom and
// HealthzHandler report it) and who leads by the database (one query,
// bounded by a 5 s deadline). It answers 200 when the database answered
// (leader null when nobody leads) and 503 with the error otherwise. For an
// Election not made by NewTable or NewLock (a test fake) healthy is left
// out and wedged is false. Safe for concurrent use.
func StatusHandler(e Election) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		st := StatusJSON{Election: e.Name(), ID: e.ID(), IsLeader: e.IsLeader(), Term: e.Term()}
		if ce, ok := e.(*Candidate); ok {
			c := ce
			st.Wedged = c.wedged()
			if c.cfg.Health.Check != nil {
				healthy := !c.unhealthy.Load()
				st.Healthy = &healthy
			}
		}
		code := http.StatusOK
		rec, err := e.Leader(ctx)
		switch {
		case err == nil:
			st.Leader = &rec
		case errors.Is(err, ErrNoLeader):
		default:
			code, st.Error = http.StatusServiceUnavailable, err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(st)
	})
}

// HealthzHandler returns an http.Handler for liveness probes of the elector
// itself (not of leadership: see LeaderCheckHandler). It answers 200 "ok"
// while e's Run runs and its campaign loop makes progress, and 503 with the
// reason when Run is not running or the loop is wedged: it has made no
// progress for more than RenewDeadline past when it was due, because a step
// or a callback holds it up (an OnLeaderChanged or OnDemoted that blocks,
// an OnElected that does not return after its context was cancelled, a
// HealthCheck that ignores its context). electionprom reports the same as
// sqlelect_wedged. While the database does not answer (a connection error
// or a timeout, since the last statement it answered), and when
// Config.Health.Check fails, it still answers 200, saying so in the body: the
// elector works (a leader stands down by its own clock), and restarting it
// would not bring the database back. It reads no database. An Election not
// made by NewTable or NewLock (a test fake) is reported "ok". Safe for
// concurrent use.
func HealthzHandler(e Election) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		var c *Candidate
		var down time.Duration
		if ce, ok := e.(*Candidate); ok {
			c, down = ce, ce.unreachableFor()
		}
		switch {
		case c == nil:
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("ok\n"))
		case !c.running.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not running\n"))
		case c.wedged():
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "wedged: no progress for %v past due (renew deadline %v)\n",
				c.overdue().Round(time.Millisecond), c.cfg.RenewDeadline)
		case down > 0:
			w.WriteHeader(http.StatusOK)
			_, _ = fmt.Fprintf(w, "ok; database unreachable for %v: retrying\n", down.Round(time.Millisecond))
		case c.unhealthy.Load():
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("ok; health check failing: not campaigning\n"))
		default:
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("ok\n"))
		}
	})
}
