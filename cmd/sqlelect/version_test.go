package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"debug/buildinfo"
)

// TestReleaseIsChangelogs: release is the CHANGELOG's newest release.
func TestReleaseIsChangelogs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (v[0-9][^ ]*) \(`).FindSubmatch(b)
	if m == nil || string(m[1]) != release {
		t.Fatalf("CHANGELOG.md's newest release %q, release = %q", m, release)
	}
}

// TestVersionOf: the tag when built at it; otherwise the release, -devel
// and the revision, the same whether the revision comes from the checkout
// (make build) or from the module's pseudo-version (go install …@COMMIT).
func TestVersionOf(t *testing.T) {
	const rev = "e079d645c6bfee4bc0c6afa023486758f3685e68"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-28T15:30:48Z"}, {Key: "vcs.modified", Value: modified}}
	}
	bi := func(v string, s []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/sqlelect/sqlelect", Version: v}, Settings: s}
	}
	devel := release + "-devel+e079d645c6bf"
	for _, tc := range []struct {
		desc string
		bi   *debug.BuildInfo
		want string
	}{
		{"go install …@v0.1.0", bi("v0.1.0", nil), "v0.1.0"},
		{"make build at the tag", bi("v0.1.0", vcs("false")), "v0.1.0"},
		{"go install …@v0.2.0-rc.1", bi("v0.2.0-rc.1", nil), "v0.2.0-rc.1"},
		{"go install …@COMMIT after a tag", bi("v0.1.1-0.20261128153048-e079d645c6bf", nil), devel},
		{"make build after a tag", bi("v0.1.1-0.20261128153048-e079d645c6bf", vcs("false")), devel},
		{"go install …@COMMIT, no tag", bi("v0.0.0-20261128153048-e079d645c6bf", nil), devel},
		{"go install …@COMMIT after a pre-release", bi("v0.2.0-rc.1.0.20261128153048-e079d645c6bf", nil), devel},
		{"make build, older Go", bi("(devel)", vcs("false")), devel},
		{"make build with changes", bi("v0.1.1-0.20261128153048-e079d645c6bf+dirty", vcs("true")), devel + ".dirty"},
		{"make build at the tag with changes", bi("v0.1.0+dirty", vcs("true")), devel + ".dirty"},
		{"-buildvcs=false", bi("(devel)", nil), release + "-devel"},
		{"no build info", nil, release + "-devel"},
	} {
		if got := versionOf(tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// versionLine is a line `sqlelect version` prints.
var versionLine = regexp.MustCompile(`^sqlelect (v[0-9]\S*) \((go[0-9.]+)\)$`)

// versionForm reports whether v is a version this release prints: its
// tag, or the tag with -devel and the revision (none when Go recorded
// none).
func versionForm(v string) bool {
	return v == release || regexp.MustCompile(`^`+regexp.QuoteMeta(release)+`-devel(\+[0-9a-f]{12}(\.dirty)?)?$`).MatchString(v)
}

// TestVersionDocs: the binary, built as make build builds it and as the
// tests build it, prints what versionOf says of its build info, in one of
// the forms docs/cli.md shows; and every version line the docs show is a
// form this release prints.
func TestVersionDocs(t *testing.T) {
	t.Parallel()
	made := filepath.Join(t.TempDir(), "sqlelect")
	// As make build builds it. Its only deadline is go test's -timeout: on
	// a fresh machine's empty build cache (CI) this build, without -race
	// where TestMain's has it, compiles every dependency again, and took
	// more than 2 minutes under CI's load.
	build := exec.Command(goTool(), "build", "-buildvcs=auto", "-o", made, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx := testCtx(t, time.Minute)
	for _, b := range []string{made, bin} {
		info, err := buildinfo.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, b, "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		want := "sqlelect " + versionOf(info) + " (" + runtime.Version() + ")"
		if got := strings.TrimSpace(string(out)); got != want || !versionForm(versionOf(info)) {
			t.Errorf("%s version: %q, want %q", b, got, want)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	forms := map[bool]bool{}
	for _, l := range strings.Split(string(doc), "\n") {
		if m := versionLine.FindStringSubmatch(l); m != nil {
			if !versionForm(m[1]) {
				t.Errorf("docs/cli.md shows %q: this release prints %s or %s-devel+REVISION", l, release, release)
			}
			forms[strings.Contains(m[1], "+")] = true
		}
	}
	if !forms[true] || !forms[false] {
		t.Errorf("docs/cli.md should show both the tag's version line and a build's between tags: %v", forms)
	}
}
