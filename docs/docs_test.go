// Package docs holds the repository's reference documentation (Markdown);
// its test checks that the documents hold together: every relative link in
// every *.md file of the repository names a file that exists and, for a
// Markdown target, a heading it has, and docs/cli.md quotes the CLI
// transcripts that cmd/sqlelect/cli-*.sh produce verbatim.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, relative to this package.
const root = ".."

var (
	fence      = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```[^\\n]*$")
	inlineCode = regexp.MustCompile("`[^`\\n]*`")
	link       = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// markdown returns the repository's *.md files, relative to root, leaving
// out hidden directories.
func markdown(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files found")
	}
	return files
}

// prose returns a Markdown text without its fenced code blocks and inline
// code, where brackets are not links.
func prose(s string) string {
	return inlineCode.ReplaceAllString(fence.ReplaceAllString(s, ""), "")
}

// slug is GitHub's anchor for a heading: lower case, punctuation dropped
// (letters, digits, spaces, hyphens and underscores kept), spaces as
// hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown text's headings, with the
// suffixes GitHub gives repeated ones.
func anchors(s string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(s, ""), -1) {
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestRelativeLinks checks every relative link of every Markdown file:
// the file it names exists, and a #fragment names a heading of the
// Markdown file it points into.
func TestRelativeLinks(t *testing.T) {
	texts := map[string]string{}
	read := func(p string) (string, bool) {
		if s, ok := texts[p]; ok {
			return s, true
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return "", false
		}
		texts[p] = string(b)
		return texts[p], true
	}
	checked := 0
	for _, file := range markdown(t) {
		src, _ := read(file)
		for _, m := range link.FindAllStringSubmatch(prose(src), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: %v", file, target, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			s, _ := read(dest)
			if !anchors(s)[frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", file, target, dest, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the pattern is broken")
	}
}

// TestSlug pins the anchors the documents link to.
func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Per server: MariaDB 10.11, MariaDB 11.8, MySQL 9.7":   "per-server-mariadb-1011-mariadb-118-mysql-97",
		"Leadership tied to the application's health":          "leadership-tied-to-the-applications-health",
		"The peers side by side (issue 25)":                    "the-peers-side-by-side-issue-25",
		"`IsLeader` and the in-process figures":                "isleader-and-the-in-process-figures",
		"Galera, Group Replication, and asynchronous replicas": "galera-group-replication-and-asynchronous-replicas",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestCLITranscripts checks that docs/cli.md quotes each transcript that
// cmd/sqlelect/cli-*.sh wrote, verbatim: regenerate the transcript, then
// paste it.
func TestCLITranscripts(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cli-transcript.txt", "cli-sidecar.txt"} {
		b, err := os.ReadFile(filepath.Join(root, "cmd", "sqlelect", name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```\n"+strings.TrimSpace(string(b))+"\n```") {
			t.Errorf("docs/cli.md does not quote cmd/sqlelect/%s verbatim in a code block", name)
		}
	}
}

// TestReadmeNamesDeps checks that the README's "Two commands" names every
// Debian package `make deps` (and so `make test`) may install: the
// Makefile's *_PKGS variables its recipe uses.
func TestReadmeNamesDeps(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z]+_PKGS)\s*:?=\s*(.*)$`).FindAllStringSubmatch(string(mk), -1) {
		vars[m[1]] = strings.Fields(m[2])
	}
	recipe := regexp.MustCompile(`(?ms)^deps:\n(.*?)\n\n`).FindStringSubmatch(string(mk))
	if recipe == nil {
		t.Fatal("Makefile: no deps target")
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`(?ms)^## Two commands\n(.*?)^## `).FindSubmatch(readme)
	if section == nil {
		t.Fatal(`README.md: no section "Two commands"`)
	}
	n := 0
	for _, ref := range regexp.MustCompile(`\$\(([A-Z]+_PKGS)\)`).FindAllStringSubmatch(recipe[1], -1) {
		for _, pkg := range vars[ref[1]] {
			n++
			if !strings.Contains(string(section[1]), "`"+pkg+"`") {
				t.Errorf("README.md, \"Two commands\", does not name `%s`, which make deps installs (%s)", pkg, ref[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no packages found in the deps recipe: the patterns are broken")
	}
}
