package election

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestBatcherConfig(t *testing.T) {
	db := &sql.DB{}
	b, err := NewBatcher(db, BatcherOptions{Table: "other_table"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		new  func(*sql.DB, Config) (*Candidate, error)
		cfg  Config
	}{
		{"table differs", NewTable, Config{Name: "e", Tuning: TuningConfig{Batcher: b}}},
		{"lock backend", NewLock, Config{Name: "e", Table: "other_table", Tuning: TuningConfig{Batcher: b}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.new(db, tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := NewBatcher(nil, BatcherOptions{}); !errors.Is(err, ErrNilDB) {
		t.Errorf("nil db: %v", err)
	}
	if _, err := NewBatcher(db, BatcherOptions{Table: "bad table"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad table: %v", err)
	}
}

// TestBatcherAloneFewAtOnce: takes sent alone after their batch failed run
// at most MaxInFlight at once, so that they leave the pool's other
// connections to the renewals; one whose context ends while it waits is
// not sent.
func TestBatcherAloneFewAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBatcher(&sql.DB{}, BatcherOptions{MaxInFlight: 2})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		running, most := 0, 0
		release := make(chan struct{})
		var takes sync.WaitGroup
		for range 5 {
			takes.Go(func() {
				_ = b.solo.Run(t.Context(), func() error {
					mu.Lock()
					running++
					most = max(most, running)
					mu.Unlock()
					<-release
					mu.Lock()
					running--
					mu.Unlock()
					return nil
				})
			})
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		sent := false
		if err := b.solo.Run(ctx, func() error { sent = true; return nil }); !errors.Is(err, context.DeadlineExceeded) || sent {
			t.Errorf("a take whose context ended while it waited: %v, sent %v; want its context's error, unsent", err, sent)
		}
		close(release)
		takes.Wait()
		if most != 2 {
			t.Errorf("%d takes alone at once, want MaxInFlight, 2", most)
		}
	})
}
