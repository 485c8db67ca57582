package electionhttp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionhttp"
	"github.com/sqlelect/sqlelect/internal/examplefake"
)

// get serves one GET of path on h, as a load balancer or a probe would.
func get(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// Route traffic to the leader: a load balancer's check on /leader gets 200
// from the leader only. It reads IsLeader, no database.
func ExampleLeaderCheckHandler() {
	_, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1"}) // NewTable's; here a fake
	defer stop()
	mux := http.NewServeMux()
	mux.Handle("/leader", electionhttp.LeaderCheckHandler(e, http.StatusServiceUnavailable)) // 0: 404
	rec := get(mux, "/leader")
	fmt.Print(rec.Code, " ", rec.Body)
	// Output: 200 leader
}

// Who leads, by the database, and this candidate's view, as JSON (StatusJSON).
func ExampleStatusHandler() {
	_, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1", Value: "10.0.0.7:8080"})
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
	_, e, stop := examplefake.Leading(election.Config{Name: "orders-scheduler", ID: "web-1"})
	defer stop()
	rec := get(electionhttp.HealthzHandler(e), "/healthz")
	fmt.Print(rec.Code, " ", rec.Body)
	// Output: 200 ok
}
