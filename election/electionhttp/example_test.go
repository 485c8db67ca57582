package electionhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionfake"
	"github.com/sqlelect/sqlelect/election/electionhttp"
)

// leading returns the in-memory fake, standing in for NewTable's
// *election.Candidate, once it leads the election cfg names, and a function
// that stops it.
func leading(cfg election.Config) (election.Election, func()) {
	f, err := electionfake.New(cfg)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ran := make(chan error, 1)
	go func() { ran <- f.Run(ctx) }()
	if _, err := f.Elect(ctx); err != nil {
		panic(err)
	}
	return f, func() {
		cancel()
		if err := <-ran; err != nil {
			panic(err)
		}
	}
}

// get serves one GET of path on h, as a load balancer or a probe would.
func get(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// Route traffic to the leader: a load balancer's check on /leader gets 200
// from the leader only. It reads IsLeader, no database.
func ExampleLeaderCheckHandler() {
	e, stop := leading(election.Config{Name: "orders-scheduler", ID: "web-1"}) // NewTable's; here a fake
	defer stop()
	mux := http.NewServeMux()
	mux.Handle("/leader", electionhttp.LeaderCheckHandler(e, http.StatusServiceUnavailable)) // 0: 404
	rec := get(mux, "/leader")
	fmt.Print(rec.Code, " ", rec.Body)
	// Output: 200 leader
}

// Who leads, by the database, and this candidate's view, as JSON (StatusJSON).
func ExampleStatusHandler() {
	e, stop := leading(election.Config{Name: "orders-scheduler", ID: "web-1", Value: "10.0.0.7:8080"})
	defer stop()
	rec := get(electionhttp.StatusHandler(e), "/status")
	var s electionhttp.StatusJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		panic(err)
	}
	fmt.Println(rec.Code, s.ID, "is leader:", s.IsLeader, "leader:", s.Leader.ID, "at", s.Leader.Value)
	// Output: 200 web-1 is leader: true leader: web-1 at 10.0.0.7:8080
}

// A liveness probe of the elector itself: 503 when Run is not running or its
// loop is wedged; 200 on followers and while the database does not answer.
func ExampleHealthzHandler() {
	e, stop := leading(election.Config{Name: "orders-scheduler", ID: "web-1"})
	defer stop()
	rec := get(electionhttp.HealthzHandler(e), "/healthz")
	fmt.Print(rec.Code, " ", rec.Body)
	// Output: 200 ok
}
