package testdb

import "testing"

func TestSplitImage(t *testing.T) {
	for _, tc := range []struct{ image, repo, tag string }{
		{"mariadb:10.11", "mariadb", "10.11"},
		{"mysql:8.4", "mysql", "8.4"},
		{"mariadb", "mariadb", "latest"},
		{"registry.local:5000/db/mariadb", "registry.local:5000/db/mariadb", "latest"},
		{"registry.local:5000/db/mariadb:11", "registry.local:5000/db/mariadb", "11"},
	} {
		repo, tag := splitImage(tc.image)
		if repo != tc.repo || tag != tc.tag {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tc.image, repo, tag, tc.repo, tc.tag)
		}
	}
}
