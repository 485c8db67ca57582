package election

import (
	"database/sql"
	"errors"
	"testing"
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
