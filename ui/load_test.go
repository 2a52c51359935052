package ui_test

import (
	"context"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/ui/uitest"
)

// TestBudgetsPageLoad1000Leaves loads the budgets page of 1,000 leaves with
// 14 days of minute buckets and reports the browser's times: from
// navigation start to the page drawn (charts and the 1,111-row tree), and
// from the router's start (the API calls, the charts, the table), best and
// median of 5 loads. The target is 1 s; the test fails when even the best
// load takes over 5 s, so that a shared, loaded machine does not make it
// flaky while a real regression still fails it.
func TestBudgetsPageLoad1000Leaves(t *testing.T) {
	if raceEnabled {
		t.Skip("skip: a load time under -race means nothing; .ci/run runs this test without it")
	}
	b := newBrowser(t)
	now := time.Now().UTC().Truncate(time.Hour)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Dev: true, Token: token, HTTPListener: ln, ReconcileInterval: time.Hour,
		Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	cl, _ := client.New(s.HTTPAddr(), token, nil)
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for _, err := cl.Budgets(ctx, false); err != nil; _, err = cl.Budgets(ctx, false) {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := uitest.SeedLarge(ctx, cl, now, 10, 10, 10, 14*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	url := "http://" + s.HTTPAddr() + "/ui/#/budgets?range=14d"
	var totals []float64
	var best, bestRoute float64
	for i := range 5 {
		route := b.open(t, url+"&try="+string(rune('a'+i)), "budgets")
		total := eval[float64](t, b, `window.allotReady.at`)
		rows := eval[int](t, b, `document.querySelectorAll('#tree-table tbody tr').length`)
		charts := eval[[]struct{ Series, Points int }](t, b, `window.allotCharts`)
		if rows != 1111 || len(charts) != 2 || charts[0].Points != 336 || charts[0].Series != 20 {
			t.Fatalf("load %d: %d tree rows, charts %+v; want 1,111 rows and 10 programs × 2 series of 336 hourly points", i, rows, charts)
		}
		t.Logf("load %d: %.0f ms from navigation start to drawn, %.0f ms of it from the router's start", i, total, route)
		totals = append(totals, total)
		if i == 0 || total < best {
			best, bestRoute = total, route
		}
		if err := chromedpReload(b); err != nil {
			t.Fatal(err)
		}
	}
	sort.Float64s(totals)
	t.Logf("budgets page, 1,000 leaves, 14 days of minute buckets: best of 5 %.0f ms (router to drawn %.0f ms), median %.0f ms",
		best, bestRoute, totals[len(totals)/2])
	if best > 5000 {
		t.Errorf("budgets page took %.0f ms to draw; the target is 1,000 ms", best)
	}
	b.noErrors(t)
}
