// Package monitoring holds the Prometheus alerting rules and the Grafana
// dashboard shipped for sqlelect; its test checks that they name only series
// that electionprom.Metrics exports. make test also runs promtool on the rules.
package monitoring

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlelect/sqlelect/election/electionprom"
)

// exported returns the metric names electionprom.Metrics describes, with the
// _bucket, _count and _sum series of its histograms.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 64)
	electionprom.NewMetrics().Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	names := map[string]bool{}
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %v", d)
		}
		names[m[1]] = true
		for _, s := range []string{"_bucket", "_count", "_sum"} {
			names[m[1]+s] = true
		}
	}
	return names
}

func TestFilesNameExportedSeries(t *testing.T) {
	names := exported(t)
	series := regexp.MustCompile(`sqlelect_[a-z_]+`)
	dash, err := os.ReadFile("sqlelect-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("sqlelect-dashboard.json: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("sqlelect-dashboard.json has no panels")
	}
	for _, f := range []string{"sqlelect-alerts.yml", "sqlelect-dashboard.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		used := series.FindAllString(string(b), -1)
		if len(used) == 0 {
			t.Errorf("%s names no sqlelect series", f)
		}
		for _, s := range used {
			if !names[s] {
				t.Errorf("%s uses %s, which electionprom.Metrics does not export", f, s)
			}
		}
	}
}
