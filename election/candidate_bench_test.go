package election

import (
	"testing"
	"time"
)

func BenchmarkIsLeader(b *testing.B) {
	for _, tc := range []struct {
		name    string
		leading bool
	}{{"leader", true}, {"follower", false}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, err := Config{Name: "bench"}.withDefaults()
			if err != nil {
				b.Fatal(err)
			}
			c := newCandidate(cfg, nil)
			if tc.leading {
				c.setDeadline(c.epoch.Add(time.Hour))
			}
			b.ReportAllocs()
			for b.Loop() {
				if c.IsLeader() != tc.leading {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
