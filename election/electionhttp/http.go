// Package electionhttp serves an election over HTTP: a leader check for
// load balancers, a JSON status, and a liveness probe of the elector
// itself. Like electionprom, it is an adapter on election.Election: it
// reads IsLeader, Leader and, when the Election has one (election.Candidate
// has), its Progress.
package electionhttp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// progress reads e's Progress, which the handlers read beyond the
// interface: *election.Candidate has it, a test fake need not. Without
// one, e is reported running and healthy, with no health check.
func progress(e election.Election) election.Progress {
	if pe, ok := e.(interface{ Progress() election.Progress }); ok {
		return pe.Progress()
	}
	return election.Progress{Running: true, Healthy: true}
}

// LeaderCheckHandler returns an http.Handler for load balancers, like
// orchestrator's /api/leader-check: it answers 200 "leader" while e leads,
// and notLeaderStatus (404 when 0) with "not leader" elsewhere. It reads only
// IsLeader: no database call. Safe for concurrent use.
func LeaderCheckHandler(e election.Election, notLeaderStatus int) http.Handler {
	notLeaderStatus = cmp.Or(notLeaderStatus, http.StatusNotFound)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		code, body := notLeaderStatus, "not leader\n"
		if e.IsLeader() {
			code, body = http.StatusOK, "leader\n"
		}
		reply(w, code, plainText, body)
	})
}

// plainText is the Content-Type of LeaderCheckHandler's and HealthzHandler's
// answers.
const plainText = "text/plain; charset=utf-8"

// reply answers code with body, of type contentType, not to be cached.
func reply(w http.ResponseWriter, code int, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// StatusJSON is the body StatusHandler serves.
type StatusJSON struct {
	Election string `json:"election"`
	ID       string `json:"id"`
	IsLeader bool   `json:"is_leader"`
	Term     uint64 `json:"term"`
	// Healthy is, with election.Config.Health.Check, whether the check's last run
	// passed (true before its first run), as sqlelect_healthy; nil (left
	// out of the JSON) without a HealthCheck.
	Healthy *bool `json:"healthy,omitempty"`
	// Wedged is true while Run runs but its campaign loop has made no
	// progress for more than RenewDeadline past when it was due, as
	// sqlelect_wedged and HealthzHandler's 503; false when Run does not
	// run.
	Wedged bool             `json:"wedged"`
	Leader *election.Record `json:"leader"` // nil when nobody leads
	Error  string           `json:"error,omitempty"`
}

// StatusHandler returns an http.Handler serving a JSON StatusJSON: this
// candidate's view (leadership, and the elector's health as electionprom and
// HealthzHandler report it) and who leads by the database (one query,
// bounded by a 5 s deadline). It answers 200 when the database answered
// (leader null when nobody leads) and 503 with the error otherwise. For an
// Election without a Progress method (a test fake; *election.Candidate has
// one) healthy is left out and wedged is false. Safe for concurrent use.
func StatusHandler(e election.Election) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		p := progress(e)
		st := StatusJSON{Election: e.Name(), ID: e.ID(), IsLeader: e.IsLeader(), Term: e.Term(), Wedged: p.Wedged}
		if p.HealthCheck {
			st.Healthy = &p.Healthy
		}
		code := http.StatusOK
		if rec, err := e.Leader(ctx); err == nil {
			st.Leader = &rec
		} else if !errors.Is(err, election.ErrNoLeader) { // ErrNoLeader: 200, leader null
			code, st.Error = http.StatusServiceUnavailable, err.Error()
		}
		body, _ := json.Marshal(st) // never fails: no channel, func or cyclic value
		reply(w, code, "application/json", string(body)+"\n")
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
// election.Config.Health.Check fails, it still answers 200, saying so in the body: the
// elector works (a leader stands down by its own clock), and restarting it
// would not bring the database back. It reads no database. An Election
// without a Progress method (a test fake) is reported "ok". Safe for
// concurrent use.
func HealthzHandler(e election.Election) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p := progress(e) // a fake's: "ok"
		switch {
		case !p.Running:
			reply(w, http.StatusServiceUnavailable, plainText, "not running\n")
		case p.Wedged:
			reply(w, http.StatusServiceUnavailable, plainText, fmt.Sprintf("wedged: no progress for %v past due (renew deadline %v)\n",
				p.Overdue.Round(time.Millisecond), p.RenewDeadline))
		case p.Unreachable > 0:
			reply(w, http.StatusOK, plainText, fmt.Sprintf("ok; database unreachable for %v: retrying\n", p.Unreachable.Round(time.Millisecond)))
		case !p.Healthy:
			reply(w, http.StatusOK, plainText, "ok; health check failing: not campaigning\n")
		default:
			reply(w, http.StatusOK, plainText, "ok\n")
		}
	})
}
