package election

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
)

// stubElection is an Election whose answers the test sets.
type stubElection struct {
	mu       sync.Mutex
	leader   bool
	term     uint64
	rec      Record
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
func (f *stubElection) Leader(ctx context.Context) (Record, error) {
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
	return ErrNotLeader
}
func (f *stubElection) Transfer(context.Context, string) error { return nil }
func (f *stubElection) Proclaim(context.Context, string) error { return nil }
func (f *stubElection) Name() string                           { return "orders" }
func (f *stubElection) ID() string                             { return "web-1" }

var _ Election = (*stubElection)(nil)

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
	rec := Record{Election: "orders", ID: "web-2", Term: 1795326944923256, Since: since,
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
			e:        &stubElection{leader: true, term: 7, rec: Record{Election: "orders", ID: "web-1", Term: 7, Backend: "lock", ConnectionID: 99}},
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
			e:        &stubElection{rec: Record{Election: "orders", ID: "web-2", Released: true}, err: fmt.Errorf("%w: orders", ErrNoLeader)},
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
	b, err := json.Marshal(StatusJSON{Leader: &Record{}, Error: "x", Healthy: &healthy})
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

func TestRecordJSONRoundTrip(t *testing.T) {
	in := Record{Election: "orders", ID: "web-1", Term: 9, Since: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		LastRenewal: time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC), Lease: 15 * time.Second,
		LeaseLeft: -1500 * time.Millisecond, Acquired: "expired", Value: "v", Backend: "lock", ConnectionID: 3}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["lease_ms"] != 15000.0 || m["lease_left_ms"] != -1500.0 {
		t.Errorf("durations in %s, want lease_ms 15000 and lease_left_ms -1500", b)
	}
	var out Record
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

// TestRecordJSONBytes pins Record's JSON to the byte, as status --json,
// watch and the HTTP handlers print it: keys in this order, durations as
// whole milliseconds truncated toward zero, omitempty keys left out when
// zero, and encoding/json's escaping.
func TestRecordJSONBytes(t *testing.T) {
	for _, tc := range []struct {
		in   Record
		want string
	}{
		{Record{}, `{"election":"","id":"","term":0,"since":"0001-01-01T00:00:00Z","last_renewal":"0001-01-01T00:00:00Z",` +
			`"lease_ms":0,"lease_left_ms":0,"released":false,"acquired":"","value":"","backend":"","priority":0}`},
		{Record{Election: "a<b>&\"c\"", ID: "web-1", Term: 1<<63 + 1, Since: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC),
			LastRenewal: time.Date(2026, 3, 1, 12, 1, 0, 0, time.FixedZone("x", 3600)), Lease: 15*time.Second + 999*time.Microsecond,
			LeaseLeft: -1500*time.Millisecond - 999*time.Microsecond, Released: true, Acquired: "transferred", Value: "v\n\u2028",
			Backend: "lock", ConnectionID: 3, Transfer: true, TransferTo: "web-2", Priority: -7},
			`{"election":"a\u003cb\u003e\u0026\"c\"","id":"web-1","term":9223372036854775809,"since":"2026-03-01T12:00:00.123456Z",` +
				`"last_renewal":"2026-03-01T12:01:00+01:00","lease_ms":15000,"lease_left_ms":-1500,"released":true,` +
				`"acquired":"transferred","value":"v\n\u2028","backend":"lock","connection_id":3,"transfer":true,` +
				`"transfer_to":"web-2","priority":-7}`},
	} {
		b, err := json.Marshal(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("JSON\n%s\nwant\n%s", b, tc.want)
		}
		var out Record
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		tc.in.Lease, tc.in.LeaseLeft = tc.in.Lease.Truncate(time.Millisecond), -(-tc.in.LeaseLeft).Truncate(time.Millisecond)
		if !out.Since.Equal(tc.in.Since) || !out.LastRenewal.Equal(tc.in.LastRenewal) {
			t.Errorf("times decoded as %v, %v; want %v, %v", out.Since, out.LastRenewal, tc.in.Since, tc.in.LastRenewal)
		}
		out.Since, out.LastRenewal, tc.in.Since, tc.in.LastRenewal = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if out != tc.in {
			t.Errorf("decoded %+v, want %+v", out, tc.in)
		}
	}
}
