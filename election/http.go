package election

import (
	"context"
	"encoding/json"
	"errors"
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
	Election string  `json:"election"`
	ID       string  `json:"id"`
	IsLeader bool    `json:"is_leader"`
	Term     uint64  `json:"term"`
	Leader   *Record `json:"leader"` // nil when nobody leads
	Error    string  `json:"error,omitempty"`
}

// StatusHandler returns an http.Handler serving a JSON StatusJSON: this
// candidate's view and who leads by the database (one query, bounded by a
// 5 s deadline). It answers 200 when the database answered (leader null
// when nobody leads) and 503 with the error otherwise. Safe for concurrent
// use.
func StatusHandler(e Election) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		st := StatusJSON{Election: e.Name(), ID: e.ID(), IsLeader: e.IsLeader(), Term: e.Term()}
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
