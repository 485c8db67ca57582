package electionhttp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// stubElection is an election.Election whose answers the test sets.
type stubElection struct {
	mu       sync.Mutex
	leader   bool
	term     uint64
	rec      election.Record
	err      error
	deadline time.Duration // how far off the deadline of Leader's ctx was
	calls    int
}

func (f *stubElection) Run(context.Context) error { return nil }
func (f *stubElection) IsLeader() bool            { f.mu.Lock(); defer f.mu.Unlock(); return f.leader }
func (f *stubElection) Term() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leader {
		return 0
	}
	return f.term
}
func (f *stubElection) Leader(ctx context.Context) (election.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if d, ok := ctx.Deadline(); ok {
		f.deadline = time.Until(d)
	}
	return f.rec, f.err
}
func (f *stubElection) Resign(context.Context) error { return nil }
func (f *stubElection) Fenced(context.Context, func(*sql.Tx) error) error {
	return election.ErrNotLeader
}
func (f *stubElection) Transfer(context.Context, string) error { return nil }
func (f *stubElection) Proclaim(context.Context, string) error { return nil }
func (f *stubElection) Name() string                           { return "orders" }
func (f *stubElection) ID() string                             { return "web-1" }

var _ election.Election = (*stubElection)(nil)

func httpGet(t *testing.T, h http.Handler) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/leader-check")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestLeaderCheckHandler(t *testing.T) {
	tests := []struct {
		name     string
		leader   bool
		status   int // the notLeaderStatus argument
		wantCode int
		wantBody string
	}{
		{"leader", true, 0, http.StatusOK, "leader\n"},
		{"leader, status configured", true, http.StatusServiceUnavailable, http.StatusOK, "leader\n"},
		{"follower, default 404", false, 0, http.StatusNotFound, "not leader\n"},
		{"follower, configured 503", false, http.StatusServiceUnavailable, http.StatusServiceUnavailable, "not leader\n"},
		{"follower, configured 429", false, http.StatusTooManyRequests, http.StatusTooManyRequests, "not leader\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &stubElection{leader: tc.leader, term: 42}
			resp, body := httpGet(t, LeaderCheckHandler(e, tc.status))
			if resp.StatusCode != tc.wantCode || body != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if e.calls != 0 {
				t.Errorf("the leader check queried the database %d times", e.calls)
			}
		})
	}
}

// The check follows IsLeader from one request to the next (a handler built
// once serves the whole life of the process).
func TestLeaderCheckHandlerFollowsLeadership(t *testing.T) {
	e := &stubElection{}
	srv := httptest.NewServer(LeaderCheckHandler(e, 0))
	defer srv.Close()
	for i, leader := range []bool{false, true, true, false} {
		e.mu.Lock()
		e.leader = leader
		e.mu.Unlock()
		resp, err := srv.Client().Head(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusNotFound
		if leader {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("request %d (leader %v): HEAD got %d, want %d", i, leader, resp.StatusCode, want)
		}
	}
}

func TestStatusHandler(t *testing.T) {
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := election.Record{Election: "orders", ID: "web-2", Term: 1795326944923256, Since: since,
		LastRenewal: since.Add(time.Minute), Lease: 15 * time.Second, LeaseLeft: 12500 * time.Millisecond,
		Acquired: "expired", Value: "10.0.0.8:8080", Backend: "table", Priority: 3}
	dbErr := fmt.Errorf("election: leader: %w", errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"))

	tests := []struct {
		name     string
		e        *stubElection
		wantCode int
		want     map[string]any // the JSON body, decoded generically
	}{
		{
			name:     "follower, another leads",
			e:        &stubElection{rec: rec},
			wantCode: http.StatusOK,
			want: map[string]any{
				"election": "orders", "id": "web-1", "is_leader": false, "term": 0.0, "wedged": false,
				"leader": map[string]any{
					"election": "orders", "id": "web-2", "term": 1795326944923256.0,
					"since": "2026-03-01T12:00:00Z", "last_renewal": "2026-03-01T12:01:00Z",
					"lease_ms": 15000.0, "lease_left_ms": 12500.0, "released": false, "acquired": "expired",
					"value": "10.0.0.8:8080", "backend": "table", "priority": 3.0,
				},
			},
		},
		{
			name:     "leader",
			e:        &stubElection{leader: true, term: 7, rec: election.Record{Election: "orders", ID: "web-1", Term: 7, Backend: "lock", ConnectionID: 99}},
			wantCode: http.StatusOK,
			want: map[string]any{
				"election": "orders", "id": "web-1", "is_leader": true, "term": 7.0, "wedged": false,
				"leader": map[string]any{
					"election": "orders", "id": "web-1", "term": 7.0,
					"since": "0001-01-01T00:00:00Z", "last_renewal": "0001-01-01T00:00:00Z",
					"lease_ms": 0.0, "lease_left_ms": 0.0, "released": false, "acquired": "",
					"value": "", "backend": "lock", "connection_id": 99.0, "priority": 0.0,
				},
			},
		},
		{
			name:     "nobody leads",
			e:        &stubElection{rec: election.Record{Election: "orders", ID: "web-2", Released: true}, err: fmt.Errorf("%w: orders", election.ErrNoLeader)},
			wantCode: http.StatusOK,
			want:     map[string]any{"election": "orders", "id": "web-1", "is_leader": false, "term": 0.0, "wedged": false, "leader": nil},
		},
		{
			name:     "database error",
			e:        &stubElection{leader: true, term: 7, err: dbErr},
			wantCode: http.StatusServiceUnavailable,
			want: map[string]any{"election": "orders", "id": "web-1", "is_leader": true, "term": 7.0, "wedged": false, "leader": nil,
				"error": dbErr.Error()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := httpGet(t, StatusHandler(tc.e))
			if resp.StatusCode != tc.wantCode {
				t.Errorf("status %d, want %d; body %s", resp.StatusCode, tc.wantCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body is not JSON: %v: %s", err, body)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("body\n got %s\nwant %s", body, statusJSONText(t, tc.want))
			}
			// It decodes into the documented type, too.
			var st StatusJSON
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatal(err)
			}
			if tc.e.calls != 1 {
				t.Errorf("Leader called %d times, want 1", tc.e.calls)
			}
			if d := tc.e.deadline; d <= 0 || d > 5*time.Second {
				t.Errorf("Leader's context deadline %v away, want within 5s", d)
			}
		})
	}
}

func statusJSONText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The StatusJSON fields are the documented keys, in snake case.
func TestStatusHandlerJSONKeys(t *testing.T) {
	healthy := true
	b, err := json.Marshal(StatusJSON{Leader: &election.Record{}, Error: "x", Healthy: &healthy})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"election", "error", "healthy", "id", "is_leader", "leader", "term", "wedged"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
}

// progressElection is a stubElection with a Progress, as *election.Candidate
// has: the handlers then report the elector's own health.
type progressElection struct {
	*stubElection
	p election.Progress
}

func (e progressElection) Progress() election.Progress { return e.p }

func TestHealthzHandler(t *testing.T) {
	running := election.Progress{Running: true, Healthy: true, RenewDeadline: 10 * time.Second}
	with := func(f func(p *election.Progress)) election.Progress { p := running; f(&p); return p }
	tests := []struct {
		name     string
		e        election.Election
		wantCode int
		wantBody string
	}{
		{"no Progress (a fake)", &stubElection{}, http.StatusOK, "ok\n"},
		{"running", progressElection{&stubElection{}, running}, http.StatusOK, "ok\n"},
		{"not running", progressElection{&stubElection{}, election.Progress{Healthy: true}}, http.StatusServiceUnavailable, "not running\n"},
		{"wedged", progressElection{&stubElection{}, with(func(p *election.Progress) {
			p.Wedged, p.Overdue = true, 10*time.Second+1234567*time.Microsecond
		})}, http.StatusServiceUnavailable, "wedged: no progress for 11.235s past due (renew deadline 10s)\n"},
		{"wedged and unreachable", progressElection{&stubElection{}, with(func(p *election.Progress) {
			p.Wedged, p.Overdue, p.Unreachable = true, 11*time.Second, 3*time.Second
		})}, http.StatusServiceUnavailable, "wedged: no progress for 11s past due (renew deadline 10s)\n"},
		{"unreachable", progressElection{&stubElection{}, with(func(p *election.Progress) {
			p.Unreachable, p.Healthy = 9*time.Second+400*time.Microsecond, false
		})}, http.StatusOK, "ok; database unreachable for 9s: retrying\n"},
		{"health check failing", progressElection{&stubElection{}, with(func(p *election.Progress) {
			p.HealthCheck, p.Healthy = true, false
		})}, http.StatusOK, "ok; health check failing: not campaigning\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := httpGet(t, HealthzHandler(tc.e))
			if resp.StatusCode != tc.wantCode || body != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
		})
	}
}

// With a Progress, the status reports wedged, and healthy when there is a
// health check.
func TestStatusHandlerProgress(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name        string
		p           election.Progress
		wantWedged  bool
		wantHealthy *bool
	}{
		{"no health check", election.Progress{Running: true, Healthy: true}, false, nil},
		{"no health check, wedged", election.Progress{Running: true, Healthy: true, Wedged: true}, true, nil},
		{"healthy", election.Progress{Running: true, HealthCheck: true, Healthy: true}, false, &yes},
		{"unhealthy", election.Progress{Running: true, HealthCheck: true}, false, &no},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, body := httpGet(t, StatusHandler(progressElection{&stubElection{err: election.ErrNoLeader}, tc.p}))
			var st StatusJSON
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatal(err)
			}
			if st.Wedged != tc.wantWedged || !reflect.DeepEqual(st.Healthy, tc.wantHealthy) {
				t.Errorf("wedged %v healthy %v, want %v %v; body %s", st.Wedged, st.Healthy, tc.wantWedged, tc.wantHealthy, body)
			}
		})
	}
}
