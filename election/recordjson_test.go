package election

import (
	"encoding/json"
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
