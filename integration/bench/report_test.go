package main

import (
	"slices"
	"testing"
	"time"
)

func TestQuantileNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 30; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 15 * time.Millisecond},
		{0.9, 27 * time.Millisecond},
		{0.99, 30 * time.Millisecond},
		{1, 30 * time.Millisecond},
		{0, 1 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := quantile(ds, tc.q); got != tc.want {
			t.Errorf("quantile(1..30 ms, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile(nil) = %v", got)
	}
}

func TestParseScale(t *testing.T) {
	tests := []struct {
		spec    string
		want    []scaleRun
		wantErr bool
	}{
		{spec: "10000:5m", want: []scaleRun{{10000, 5 * time.Minute, true}}},
		{spec: "10000:5m, 20000:1m:unbatched", want: []scaleRun{{10000, 5 * time.Minute, true}, {20000, time.Minute, false}}},
		{spec: "10000", wantErr: true},
		{spec: "x:5m", wantErr: true},
		{spec: "0:5m", wantErr: true},
		{spec: "10:0s", wantErr: true},
		{spec: "10:5m:batched", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseScale(tc.spec)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseScale(%q) = %v, %v; want %v, error %v", tc.spec, got, err, tc.want, tc.wantErr)
		}
	}
}
