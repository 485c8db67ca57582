package election

import (
	"errors"
	"testing"
)

func TestCheckIDSpaces(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"n1", true},
		{"web-1:4242:a1b2c3", true},
		{" n1", true}, // a leading space is significant under PAD SPACE too
		{"n 1", true},
		{"", true}, // empty is ValidateID's to refuse
		{"n1 ", false},
		{"n1   ", false},
		{" ", false},
		{"   ", false},
		{"\u3000", false}, // ideographic space only
		{"\u00a0 ", false},
		{"n1\u00a0", true}, // not padded by the server
	} {
		err := checkIDSpaces(tc.id)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("checkIDSpaces(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}
