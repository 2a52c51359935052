package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// dashboardPanel is what the test reads of a Grafana panel.
type dashboardPanel struct {
	Title   string
	Type    string
	Targets []struct{ Expr string }
	Panels  []dashboardPanel // a row's panels, when collapsed
}

var metricName = regexp.MustCompile(`\ballot_[a-z0-9_]+`)

// The Grafana dashboard of examples/deploy charts only metrics the server
// exports, and every family it exports; the Prometheus scrape reads the
// path the server serves them on.
func TestDeployDashboardAndScrapeMatchMetrics(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	exported := map[string]bool{}
	for _, n := range s.metrics.familyNames() {
		exported[n] = true
	}
	if !exported["allot_drains_started_total"] || !exported["allot_http_request_duration_seconds"] {
		t.Fatalf("familyNames misses families without samples: %v", s.metrics.familyNames())
	}

	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "deploy", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct{ Panels []dashboardPanel }
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	charted := map[string]bool{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				names := metricName.FindAllString(tg.Expr, -1)
				if len(names) == 0 {
					t.Errorf("panel %q: query %q names no allot metric", p.Title, tg.Expr)
				}
				for _, n := range names {
					family := n
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if base, ok := strings.CutSuffix(n, suffix); ok && exported[base] {
							family = base
						}
					}
					if !exported[family] {
						t.Errorf("panel %q: %s is not a metric allot exports", p.Title, n)
					}
					charted[family] = true
				}
			}
		}
	}
	walk(dash.Panels)
	var missing []string
	for n := range exported {
		if !charted[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("exported but on no panel of the dashboard: %v", missing)
	}

	y, err := os.ReadFile(filepath.Join("..", "..", "examples", "deploy", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	paths := regexp.MustCompile(`(?m)^\s*metrics_path:\s*(\S+)`).FindAllStringSubmatch(string(y), -1)
	if len(paths) == 0 {
		t.Fatal("prometheus.yml sets no metrics_path (Prometheus' default /metrics is not allot's)")
	}
	for _, p := range paths {
		if code, _ := rawRequest(t, s, "GET", p[1], "", nil); code != 200 {
			t.Errorf("prometheus.yml scrapes %s: the server answers %d", p[1], code)
		}
	}
}
