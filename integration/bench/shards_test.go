package main

import "testing"

func TestParseShards(t *testing.T) {
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"10000:5:5m", true},
		{"10000:5:5m, 200:3:20s", true},
		{"10000:5", false},
		{"10000:1:5m", false},
		{"x:5:5m", false},
		{"10000:5:0s", false},
	} {
		runs, err := parseShards(tc.spec)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, %v", tc.spec, runs, err)
		}
	}
	if runs, _ := parseShards("10000:5:5m"); runs[0] != (shardsRun{shards: 10000, procs: 5, window: 5 * 60e9}) {
		t.Errorf("10000:5:5m: %+v", runs[0])
	}
}
