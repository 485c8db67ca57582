package testdb

import "testing"

func TestRedact(t *testing.T) {
	if got := redact("u:secret@tcp(h:1)/db"); got != "u:***@tcp(h:1)/db" {
		t.Errorf("redact = %q", got)
	}
	if got := redact("u@tcp(h:1)/db"); got != "u@tcp(h:1)/db" {
		t.Errorf("redact without password = %q", got)
	}
}
