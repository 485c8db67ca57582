package ident

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// TestIDSpaces: ID refuses the identities the server could confuse with
// another (a trailing space) or that show as blank.
func TestIDSpaces(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"n1", true},
		{"web-1:4242:a1b2c3", true},
		{" n1", true}, // a leading space is significant under PAD SPACE too
		{"n 1", true},
		{"", false},
		{"n1 ", false},
		{"n1   ", false},
		{" ", false},
		{"   ", false},
		{"\u3000", false}, // ideographic space only
		{"\u00a0 ", false},
		{"n1\u00a0", true}, // not padded by the server
	} {
		err := ID(tc.id)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}

// Name and Table's identifiers accept what the regular expressions they
// replaced accepted, for every byte at every place, and at the lengths'
// edges.
func TestNameAndIdentifier(t *testing.T) {
	nameRE := regexp.MustCompile(`^[A-Za-z0-9._:/@-]{1,128}$`)
	identRE := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,63}$`)
	var inputs []string
	for b := range 256 {
		c := string(rune(b))
		if b >= 0x80 {
			c = string([]byte{byte(b)})
		}
		inputs = append(inputs, c, "a"+c, c+"a", "x"+c+"y")
	}
	inputs = append(inputs, "", "é", "a\n", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 65),
		strings.Repeat("n", 128), strings.Repeat("n", 129), "service_election", "app.service_election", "$x", "9x")
	for _, in := range inputs {
		if got, want := Name(in) == nil, nameRE.MatchString(in); got != want {
			t.Errorf("Name(%q) accepts %v, want %v", in, got, want)
		}
		if got, want := identifier(in), identRE.MatchString(in); got != want {
			t.Errorf("identifier(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		table string
		want  string // in the error; "" for none
	}{
		{"service_election", ""},
		{"app.service_election", ""},
		{strings.Repeat("t", 55), ""},
		{strings.Repeat("t", 56), "56 characters, at most 55"},
		{strings.Repeat("d", 64) + ".t", ""},
		{strings.Repeat("d", 65) + ".t", "must be an identifier"},
		{"a.b.c", "must be an identifier"},
		{"", "must be an identifier"},
		{"no-such;table", "must be an identifier"},
	} {
		err := Table(tc.table)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Table(%q) = %v, want %q", tc.table, err, tc.want)
		}
	}
}

// TestQuote: a table, qualified or not, is quoted part by part.
func TestQuote(t *testing.T) {
	for table, want := range map[string]string{
		"service_election":     "`service_election`",
		"app.service_election": "`app`.`service_election`",
	} {
		if got := Quote(table); got != want {
			t.Errorf("Quote(%q) = %s, want %s", table, got, want)
		}
	}
}
