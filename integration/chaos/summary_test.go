//go:build linux

package chaos

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// summary collects every run of this test binary for the table printed at
// the end (TestMain).
var summary = &summaryTable{}

type summaryTable struct {
	mu   sync.Mutex
	runs []summaryRun
}

type summaryRun struct {
	backend string
	res     Result
	cfg     Config // what res was checked against
}

func (s *summaryTable) add(backend string, res Result, cfg Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, summaryRun{backend: backend, res: res, cfg: cfg})
}

func (s *summaryTable) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs) == 0
}

// margins renders a table of how close each run came to the checker's
// bounds (Result.Margins), each with its bound: the values a bound must
// leave room for on a busy machine.
func (s *summaryTable) margins() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "backend\tnext leader after a fault (bound)\tafter\tfenced write after its leadership (slack)\tlongest heartbeat stall (stuck after)")
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	for _, run := range s.runs {
		m, cfg := run.res.Margins, run.cfg
		stuck := cfg.StuckAfter
		if stuck <= 0 {
			stuck = cfg.Bound
		}
		after := m.NextLeaderAfter
		if after == "" {
			after = "-"
		}
		fmt.Fprintf(w, "%s\t%s (%s)\t%s\t%s (%s)\t%s (%s)\n", run.backend, r(m.NextLeader), r(cfg.Bound), after,
			r(m.FencedLate), r(cfg.FenceSlack), r(m.Stall), r(stuck))
	}
	w.Flush()
	return b.String()
}

// String renders two tables: faults per backend and kind with the failover
// times (fault start to the next leader's election) and the violations that
// began during each kind of fault (see Violation.At), and the checks per
// backend.
func (s *summaryTable) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "backend\tfault\tinjected\tsurvived\tfailovers\tmin\tmedian\tp99\tmax\tlate\toverlaps\tstuck\tother violations")
	for _, r := range s.runs {
		byKind := map[string][]FaultOutcome{}
		for _, f := range r.res.Faults {
			byKind[f.Fault.Kind] = append(byKind[f.Fault.Kind], f)
		}
		kinds := make([]string, 0, len(byKind))
		for k := range byKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			var ds []time.Duration
			survived, late, overlaps, stuck, other := 0, 0, 0, 0, 0
			for _, f := range byKind[k] {
				for kind, n := range f.Violations {
					switch kind {
					case "overlap":
						overlaps += n
					case "stuck":
						stuck += n
					case "liveness": // the late column
					default:
						other += n
					}
				}
				switch {
				case f.Survived:
					survived++
				case f.Next != nil:
					ds = append(ds, f.Failover)
				}
				if !f.Recovered {
					late++
				}
			}
			mn, med, p99, mx := stats(ds)
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", r.backend, k, len(byKind[k]), survived, len(ds),
				mn, med, p99, mx, late, overlaps, stuck, other)
		}
	}
	w.Flush()
	b.WriteString("\n")
	w = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "backend\tfaults\tleaderships\tterms checked\toverlaps\tterm errors\tin history\thistory errors\tfence errors\tliveness\tstuck\tserver\tprotocol\tfenced writes\tfenced rejected\tdeadlocks retried\tother heartbeat errors")
	for _, r := range s.runs {
		other := 0.0
		for k, v := range r.res.Errors {
			if k != "deadlock" {
				other += v
			}
		}
		hist := "-" // not checked
		if r.res.HistoryChecked >= 0 {
			hist = fmt.Sprint(r.res.HistoryChecked)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.0f\n", r.backend, len(r.res.Faults),
			len(r.res.Intervals), r.res.TermsChecked, r.res.Count("overlap"), r.res.Count("term"), hist, r.res.Count("history"), r.res.Count("fence"),
			r.res.Count("liveness"), r.res.Count("stuck"), r.res.Count("server"), r.res.Count("protocol"), r.res.Writes, r.res.FencedRejected,
			r.res.Errors["deadlock"], other)
	}
	w.Flush()
	return b.String()
}

// maxViolationsShown is how many violations of each run the summary
// repeats at its end.
const maxViolationsShown = 5

// violations renders each failed run's first n violations (with their
// evidence), or nothing when no run failed.
func (s *summaryTable) violations(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, r := range s.runs {
		vs := r.res.Violations
		if len(vs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s: %d violation(s), the first %d:\n", r.backend, len(vs), min(n, len(vs)))
		for _, v := range vs[:min(n, len(vs))] {
			fmt.Fprintf(&b, "  %s\n", strings.ReplaceAll(v.String(), "\n", "\n  "))
		}
	}
	return b.String()
}

// stats returns min, median, p99 (nearest rank) and max, or dashes.
func stats(ds []time.Duration) (mn, med, p99, mx string) {
	if len(ds) == 0 {
		return "-", "-", "-", "-"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(ds))+0.999999) - 1
		return ds[max(0, min(i, len(ds)-1))]
	}
	f := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return f(ds[0]), f(rank(0.5)), f(rank(0.99)), f(ds[len(ds)-1])
}

// printSummary prints the table and writes it to $SQLELECT_CHAOS_SUMMARY.
func printSummary() {
	if summary.empty() {
		return
	}
	s := summary.String()
	fmt.Printf("\nsqlelect chaos summary (failover: from the fault's start to the next leader's election; late: no leader within the bound after the fault ended)\n\n%s\n", s)
	fmt.Printf("closest to the bounds (the largest value of each run; a bound a run comes near on an idle machine may be crossed on a busy one):\n\n%s\n", summary.margins())
	// Last, where a log's tail shows them: go test -v prints a failed
	// run's messages among every other test's lines.
	fmt.Print(summary.violations(maxViolationsShown))
	if path := os.Getenv(EnvSummary); path != "" {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "writing %s: %v\n", path, err)
		}
	}
}
