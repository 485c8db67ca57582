package election

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestRecordJSON checks Record's JSON byte for byte (cmd/sqlelect's status
// --json and watch print it) and that it decodes back to the same record.
func TestRecordJSON(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	for _, tc := range []struct {
		name string
		r    Record
		want string
	}{
		{"zero", Record{}, `{"election":"","id":"","term":0,"since":"0001-01-01T00:00:00Z","last_renewal":"0001-01-01T00:00:00Z","lease_ms":0,"lease_left_ms":0,"released":false,"acquired":"","value":"","backend":"","priority":0}`},
		{"full", Record{Election: "e", ID: "me", Term: 7, Since: since, LastRenewal: since.Add(time.Second),
			Lease: 15 * time.Second, LeaseLeft: 1500*time.Millisecond + 999*time.Microsecond, Released: true,
			Acquired: "transferred", Value: "v<&>", Backend: "lock", ConnectionID: 42, Transfer: true,
			TransferTo: "you", Priority: 3},
			`{"election":"e","id":"me","term":7,"since":"2026-01-02T03:04:05.6Z","last_renewal":"2026-01-02T03:04:06.6Z","lease_ms":15000,"lease_left_ms":1500,"released":true,"acquired":"transferred","value":"v\u003c\u0026\u003e","backend":"lock","connection_id":42,"transfer":true,"transfer_to":"you","priority":3}`},
		{"negative left", Record{ID: "x", LeaseLeft: -2500 * time.Microsecond, Lease: time.Second},
			`{"election":"","id":"x","term":0,"since":"0001-01-01T00:00:00Z","last_renewal":"0001-01-01T00:00:00Z","lease_ms":1000,"lease_left_ms":-2,"released":false,"acquired":"","value":"","backend":"","priority":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("Marshal =\n%s\nwant\n%s", b, tc.want)
			}
			var back Record
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			want := tc.r
			want.Lease, want.LeaseLeft = want.Lease.Truncate(time.Millisecond), time.Duration(want.LeaseLeft.Milliseconds())*time.Millisecond
			if back != want {
				t.Fatalf("round trip = %+v, want %+v", back, want)
			}
		})
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
