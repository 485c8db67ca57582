package members

import "testing"

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
		ok   bool
	}{
		{"1.2.3", "1.2.3", 0, true},
		{"v1.2.3", "1.2.3", 0, true},
		{"1.2.3", "1.10.0", -1, true},
		{"2.0.0", "1.99.99", 1, true},
		{"1.2.3-rc.1", "1.2.3", -1, true},
		{"1.2.3", "1.2.3-rc.1", 1, true},
		{"1.2.3-rc.1", "1.2.3-rc.2", -1, true},
		{"1.2.3+build.7", "1.2.3", 0, true},
		{"1.2", "1.2.0", 0, false},
		{"latest", "1.2.3", 0, false},
		{"", "1.2.3", 0, false},
		{"(devel)", "(devel)", 0, false},
	} {
		if got, ok := compareVersions(tc.a, tc.b); got != tc.want || ok != tc.ok {
			t.Errorf("compareVersions(%q, %q) = %d, %v; want %d, %v", tc.a, tc.b, got, ok, tc.want, tc.ok)
		}
	}
}
