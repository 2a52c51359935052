package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/ui/uitest"
)

// TestPagesInBrowser opens every page of the UI in headless Chromium
// against a seeded -dev server and checks the figures it shows against the
// seed's formulas and the API, the charts' ink, the filters and links, and
// that the browser logged no error.
func TestPagesInBrowser(t *testing.T) {
	b := newBrowser(t)
	now := time.Now().UTC().Truncate(time.Hour)
	s := seeded(t, now)
	base := "http://" + s.HTTPAddr() + "/ui/"
	cl, _ := client.New(s.HTTPAddr(), "", nil)
	ctx := context.Background()

	t.Run("behind a path prefix", func(t *testing.T) {
		// A proxy serving the server under /allot/: the pages and their
		// API calls are relative, so everything resolves under the prefix.
		target, _ := url.Parse("http://" + s.HTTPAddr())
		rp := httputil.NewSingleHostReverseProxy(target)
		var outside []string
		var mu sync.Mutex
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rest, ok := strings.CutPrefix(r.URL.Path, "/allot")
			if !ok {
				mu.Lock()
				outside = append(outside, r.URL.Path)
				mu.Unlock()
				http.NotFound(w, r)
				return
			}
			r.URL.Path, r.URL.RawPath = rest, ""
			rp.ServeHTTP(w, r)
		}))
		defer proxy.Close()
		b.open(t, proxy.URL+"/allot/ui/#/queue", "queue")
		if n := eval[int](t, b, `document.querySelectorAll('#queue-table tbody tr').length`); n != 7 {
			t.Errorf("queue behind /allot/: %d rows, want 7", n)
		}
		b.open(t, proxy.URL+"/allot/ui/#/budgets", "budgets")
		if n := eval[int](t, b, `window.allotCharts.length`); n != 2 {
			t.Errorf("budgets behind /allot/: %d charts, want 2", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(outside) > 0 {
			t.Errorf("requests outside the prefix: %v", outside)
		}
		b.noErrors(t)
	})

	t.Run("read token", func(t *testing.T) {
		// A proxy that refuses reads without a bearer token stands in for
		// a server with a read token: the UI asks for it, keeps it in the
		// tab and sends it.
		target, _ := url.Parse("http://" + s.HTTPAddr())
		rp := httputil.NewSingleHostReverseProxy(target)
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/v1/") && r.Header.Get("Authorization") != "Bearer read-secret" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error":"a read token is required"}`)
				return
			}
			rp.ServeHTTP(w, r)
		}))
		defer proxy.Close()
		if err := chromedp.Do(b.ctx, chromedp.Navigate(proxy.URL+"/ui/#/queue")); err != nil {
			t.Fatal(err)
		}
		if _, err := poll[bool](b, `!document.querySelector('#token-form').hidden`); err != nil {
			t.Fatalf("no token prompt after a refused read: %v", err)
		}
		if why := b.text(t, "#token-why"); !strings.Contains(why, "a read token is required") {
			t.Errorf("token prompt says %q", why)
		}
		b.screenshot(t, "token.png")
		eval[bool](t, b, `document.querySelector('#token-input').value = 'read-secret'; document.querySelector('#token-form').requestSubmit(); true`)
		b.waitReady(t, "queue")
		if n := eval[int](t, b, `document.querySelectorAll('#queue-table tbody tr').length`); n != 7 {
			t.Errorf("queue with the token: %d rows, want 7", n)
		}
		if tok := eval[string](t, b, `sessionStorage.getItem('allot-token')`); tok != "read-secret" {
			t.Errorf("token kept as %q", tok)
		}
		eval[bool](t, b, `sessionStorage.clear(); true`)
		b.mu.Lock()
		b.errors = nil // the refused reads are logged by the browser, as they should be
		b.mu.Unlock()
	})

	t.Run("follower without a leader", func(t *testing.T) {
		// A follower that cannot reach the leader answers 503 to reads;
		// the UI falls back to the server's own copy (?stale) and says so.
		target, _ := url.Parse("http://" + s.HTTPAddr())
		rp := httputil.NewSingleHostReverseProxy(target)
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, stale := r.URL.Query()["stale"]; strings.HasPrefix(r.URL.Path, "/v1/") && !stale {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"error":"no leader; retry shortly, or read with ?stale"}`)
				return
			}
			rp.ServeHTTP(w, r)
		}))
		defer proxy.Close()
		b.open(t, proxy.URL+"/ui/#/queue", "queue")
		if n := eval[int](t, b, `document.querySelectorAll('#queue-table tbody tr').length`); n != 7 {
			t.Errorf("queue from a leaderless follower: %d rows, want 7", n)
		}
		if st := b.text(t, "#status"); !strings.Contains(st, "own copy") {
			t.Errorf("status %q: want it to say the figures are this server's own copy", st)
		}
		b.mu.Lock()
		b.errors = nil // the 503s are logged by the browser, as they should be
		b.mu.Unlock()
	})

	t.Run("budgets", func(t *testing.T) {
		ms := b.open(t, base+"#/budgets", "budgets")
		t.Logf("budgets page ready in %.0f ms", ms)
		// The tree: shares as declared, normalized and effective.
		row := b.text(t, `tr[data-path="ai2/prior/olmo/pretrain"]`)
		if !strings.Contains(row, "55") || !strings.Contains(row, "55.0%") || !strings.Contains(row, "13.2%") {
			t.Errorf("pretrain row %q: want share 55, 55.0%% of parent, 13.2%% of the cluster", row)
		}
		// Charged over 7 days of a leaf that only the seeded ledger charged.
		bs, _ := cl.Budgets(ctx, false)
		eff := 0.0
		for _, x := range bs.Budgets {
			if x.Path == uitest.ExactLeaf {
				eff = x.Effective
			}
		}
		want := fmt.Sprintf("%.1f", uitest.ExpectedCharged(uitest.ExactLeaf, eff, now.Add(-7*24*time.Hour), now))
		if row := b.text(t, fmt.Sprintf(`tr[data-path=%q]`, uitest.ExactLeaf)); !strings.Contains(row, "\t"+want+"\t") {
			t.Errorf("%s row %q: want charged %s GPU-h over 7d", uitest.ExactLeaf, row, want)
		}
		// Delivered/owed as the API computes it, for 1 and 7 days.
		for i, since := range []string{"1d", "7d"} {
			u, err := cl.Usage(ctx, since, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range u.Budgets {
				if r.Path != "ai2/prior/olmo/pretrain" {
					continue
				}
				cell := eval[string](t, b, fmt.Sprintf(`document.querySelector('tr[data-path="ai2/prior/olmo/pretrain"]').cells[%d].innerText`, 4+i))
				if w := fmt.Sprintf("%.0f%%", 100*float64(r.Ratio)); cell != w {
					t.Errorf("pretrain delivered/owed %s: page %q, API %s", since, cell, w)
				}
				if since != "7d" {
					continue
				}
				same := eval[string](t, b, `document.querySelector('tr[data-path="ai2/prior/olmo/pretrain"]').cells[7].innerText`)
				if w := fmt.Sprintf("%.0f%%", 100*float64(r.CreditedRatio)); same != w {
					t.Errorf("pretrain same hour 7d: page %q, API %s", same, w)
				}
			}
		}
		// Charts: a used line and a dashed share per program (5), 7 days
		// of hourly points, with ink on the canvas.
		charts := eval[[]struct {
			Series, Points int
			Max            float64
		}](t, b, `window.allotCharts`)
		if len(charts) != 2 || charts[0].Series != 10 || charts[0].Points != 168 || charts[0].Max <= 0 || charts[1].Series != 5 {
			t.Errorf("charts %+v: want used (10 series, 168 points) and demand (5 series)", charts)
		}
		ink := eval[int](t, b, fmt.Sprintf(inkedPixels, 0))
		if ink < 2000 {
			t.Errorf("the used-vs-allocation chart has %d inked pixels: drew nothing?", ink)
		}
		// Hover reads exact values in the legend.
		box := eval[[]float64](t, b, `(() => { const r = document.querySelector('#chart-used .u-over').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()`)
		if err := chromedp.Do(b.ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0]+box[2]*0.6, box[1]+box[3]/2)); err != nil {
			t.Fatal(err)
		}
		if legend := b.text(t, "#chart-used .u-legend"); !strings.Contains(legend, " GPUs") {
			t.Errorf("hovering the chart shows no values in its legend: %q", legend)
		}
		b.accessible(t)
		b.screenshot(t, "budgets.png")
		// The range is a radio group: arrow keys move it (7d -> 14d).
		eval[bool](t, b, `document.querySelector('button[data-range="7d"]').focus(); true`)
		if err := chromedp.Do(b.ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
			t.Fatal(err)
		}
		if _, err := poll[bool](b, `document.activeElement.dataset.range === '14d' && document.querySelector('button[data-range="14d"]').getAttribute('aria-checked') === 'true' && window.allotCharts.length === 2 && window.allotCharts[0].points === 336`); err != nil {
			t.Errorf("ArrowRight on the 7d range did not select 14d (336 hourly points): %v", err)
		}
		// Range 24h: 5-minute points.
		b.click(t, `button[data-range="24h"]`)
		if _, err := poll[int](b, `window.allotCharts.length === 2 && window.allotCharts[0].points === 288 && 288`); err != nil {
			t.Errorf("range 24h: want 288 five-minute points: %v", err)
		}
		// A budget's link shows its subtree: olmo has 3 children.
		b.click(t, `tr[data-path="ai2/prior/olmo"] a`)
		b.waitReady(t, "budgets")
		n, err := poll[int](b, `location.hash === "#/budgets/ai2%2Fprior%2Folmo" && window.allotCharts.length === 2 && window.allotCharts[0].series`)
		if err != nil || n != 6 {
			t.Errorf("olmo's page: %d series, want 6 (3 children used + share): %v", n, err)
		}
		if rows := b.text(t, "#tree-table tbody"); strings.Contains(rows, "ai2/nlp") || !strings.Contains(rows, "ai2/prior/olmo/evals") {
			t.Errorf("olmo's tree lists %q: want only olmo's subtree", rows)
		}
		b.screenshot(t, "budget-olmo.png")
		b.noErrors(t)
	})

	t.Run("queue", func(t *testing.T) {
		b.open(t, base+"#/queue", "queue")
		q, _ := cl.Queue(ctx, false)
		ids := eval[[]string](t, b, `[...document.querySelectorAll('#queue-table tbody tr')].map(r => r.dataset.job)`)
		if len(ids) != len(q.Jobs) || len(ids) != 7 || ids[0] != "default/olmo-eval-sweep" || ids[2] != "default/big-pretrain" {
			t.Fatalf("queue rows %v: want the 7 seeded jobs in the API's order", ids)
		}
		first := q.Jobs[0]
		row := b.text(t, `tr[data-job="default/olmo-eval-sweep"]`)
		wantServed := fmt.Sprintf("%.2f", float64(first.Standing.ServedRatio))
		wantLF := fmt.Sprintf("%.2f", float64(first.Standing.Parts[0].Level))
		for _, w := range []string{"pending", "89", fmt.Sprintf("%.4f", float64(first.SortMetric)), wantServed, wantLF, "GPUs free at"} {
			if !strings.Contains(row, w) {
				t.Errorf("queue row %q lacks %q", row, w)
			}
		}
		b.accessible(t)
		b.screenshot(t, "queue.png")
		for _, tc := range []struct {
			name, js string
			want     int
		}{
			{"namespace research", `document.querySelector('#f-ns').value = 'research'; document.querySelector('#f-ns').dispatchEvent(new Event('change'))`, 1},
			{"budget ai2/prior", `document.querySelector('#f-ns').value = ''; document.querySelector('#f-budget').value = 'ai2/prior'; document.querySelector('#f-budget').dispatchEvent(new Event('change'))`, 3},
			{"search video", `document.querySelector('#f-budget').value = ''; const s = document.querySelector('#f-job'); s.value = 'video'; s.dispatchEvent(new Event('input'))`, 1},
		} {
			rows := eval[int](t, b, tc.js+`; document.querySelectorAll('#queue-table tbody tr').length`)
			if rows != tc.want {
				t.Errorf("filter %s: %d rows, want %d", tc.name, rows, tc.want)
			}
		}
		b.click(t, `tr[data-job="default/video-diffusion"] td:nth-child(2) a`)
		b.waitReady(t, "job")
		if h := b.text(t, "h1"); h != "Job default/video-diffusion" {
			t.Errorf("the queue's job link opened %q", h)
		}
		b.noErrors(t)
	})

	t.Run("job", func(t *testing.T) {
		b.open(t, base+"#/job/default%2Fvideo-diffusion", "job")
		h, err := cl.JobHistory(ctx, "default/video-diffusion", false)
		if err != nil {
			t.Fatal(err)
		}
		// 17 h on gpu-03 and 2 h since the requeue, 8 GPUs each.
		if h.ChargedGPUHours != 152 || h.Placements != 2 || h.Requeues != 1 {
			t.Errorf("history: charged %.2f GPU-h, %d placements, %d requeues; want 152, 2, 1", h.ChargedGPUHours, h.Placements, h.Requeues)
		}
		summary := b.text(t, "#job-summary")
		if !strings.Contains(summary, "152.00 GPU-h over 2 placements, 1 requeues") || !strings.Contains(summary, "ai2/vision/video") {
			t.Errorf("job summary %q", summary)
		}
		why := b.text(t, "#job-why")
		if !strings.Contains(why, "time-slicing") || !strings.Contains(why, "default/reasoning-grpo") || !strings.Contains(why, "ai2/nlp/reasoning") {
			t.Errorf("why box %q: want the time-slicing stop for default/reasoning-grpo of ai2/nlp/reasoning", why)
		}
		// The standings recorded with the stop, as the history API gives them.
		var stop client.JobEvent
		for _, e := range h.Events {
			if e.StopKind == client.StopTimeSlicing {
				stop = e
			}
		}
		if stop.ForJobStandingAtStop == nil || stop.StandingAtStop == nil {
			t.Fatalf("the time-slicing stop carries no standings: %+v", stop)
		}
		want := fmt.Sprintf("When it was stopped, that budget ranked #%d among budgets, most owed first (served %.2f), this job's budget #%d (served %.2f).",
			stop.ForJobStandingAtStop.LeafPosition, float64(stop.ForJobStandingAtStop.ServedRatio),
			stop.StandingAtStop.LeafPosition, float64(stop.StandingAtStop.ServedRatio))
		if !strings.Contains(why, want) {
			t.Errorf("why box %q lacks %q", why, want)
		}
		kinds := eval[[]string](t, b, `[...document.querySelectorAll('#job-events tbody tr')].map(r => r.dataset.kind)`)
		joined := strings.Join(kinds, ",")
		if !strings.HasPrefix(joined, "submitted,placed,") || !strings.Contains(joined, "stopped") || !strings.Contains(joined, "requeued") {
			t.Errorf("history rows %v: want submitted, placed, ..., stopped, requeued", kinds)
		}
		b.accessible(t)
		b.screenshot(t, "job.png")
		b.noErrors(t)
	})

	t.Run("nodes", func(t *testing.T) {
		b.open(t, base+"#/nodes", "nodes")
		if c := b.text(t, "#nodes-count"); c != "8 GPU nodes, 63 of 64 GPUs healthy." {
			t.Errorf("nodes count %q", c)
		}
		if r := b.text(t, `tr[data-node="node-06"]`); !strings.Contains(r, "7 / 8") || !strings.Contains(r, "XID 79") || !strings.Contains(r, "scratch-notebook") {
			t.Errorf("gpu-06 row %q: want 7 / 8 healthy, the XID 79 fault and its allocation", r)
		}
		// Each GPU of node-06 on its own line: model, ID, and health in
		// words, the unhealthy one with Nomad's reason.
		gpus := eval[[]string](t, b, `[...document.querySelectorAll('tr[data-node="node-06"] ul.gpus li')].map(li => li.innerText)`)
		if len(gpus) != uitest.GPUsPerNode {
			t.Fatalf("node-06 GPUs %q: want %d lines", gpus, uitest.GPUsPerNode)
		}
		for i, g := range gpus {
			want := fmt.Sprintf("%s GPU-%d: healthy", uitest.GPUModel, i)
			if i == 3 {
				want = fmt.Sprintf("%s GPU-3: unhealthy: %s", uitest.GPUModel, uitest.UnhealthyGPUReason(now))
			}
			if g != want {
				t.Errorf("node-06 GPU line %d %q, want %q", i, g, want)
			}
		}
		if bad := eval[[]string](t, b, `[...document.querySelectorAll('ul.gpus li[data-healthy="false"]')].map(li => li.closest('tr').dataset.node + '/' + li.dataset.gpu)`); len(bad) != 1 || bad[0] != "node-06/GPU-3" {
			t.Errorf("unhealthy GPUs on the page %q, want only node-06/GPU-3", bad)
		}
		if n := eval[int](t, b, `document.querySelectorAll('ul.gpus li[data-healthy="true"]').length`); n != uitest.Capacity-1 {
			t.Errorf("%d healthy GPU lines, want %d", n, uitest.Capacity-1)
		}
		until := now.Add(90 * time.Minute).Format("2006-01-02 15:04Z")
		if r := b.text(t, `tr[data-node="node-07"]`); !strings.Contains(r, "reserved for default/big-pretrain") || !strings.Contains(r, "until "+until) {
			t.Errorf("gpu-07 row %q: want its reservation for default/big-pretrain until %s", r, until)
		}
		if r := b.text(t, `tr[data-node="node-03"]`); !strings.Contains(r, "default/reasoning-grpo") || !strings.Contains(r, "protected until") {
			t.Errorf("gpu-03 row %q: want reasoning-grpo protected", r)
		}
		b.accessible(t)
		b.screenshot(t, "nodes.png")
		b.noErrors(t)
	})

	t.Run("decisions", func(t *testing.T) {
		b.open(t, base+"#/decisions?kind=preempt", "decisions")
		rows := eval[[]string](t, b, `[...document.querySelectorAll('#decisions-table tbody tr')].map(r => r.innerText)`)
		if len(rows) != 1 || !strings.Contains(rows[0], "default/video-diffusion") || !strings.Contains(rows[0], "time slicing") {
			t.Errorf("kind=preempt rows %q: want the one time-slicing stop", rows)
		}
		eval[bool](t, b, `document.querySelector('#d-kind').value = ''; document.querySelector('#d-budget').value = 'ai2/vision'; document.querySelector('form.controls').requestSubmit(); true`)
		if _, err := poll[int](b, `document.querySelector('#decisions-count').innerText.startsWith('3 decisions') && 3`); err != nil {
			t.Errorf("budget ai2/vision: %q, want the 3 decisions about video-diffusion: %v", b.text(t, "#decisions-count"), err)
		}
		b.accessible(t)
		b.screenshot(t, "decisions.png")
		// Live: a decision made now shows up without a reload (the page
		// polls every 5 s).
		b.open(t, base+"#/decisions?kind=budgets", "decisions")
		before := b.text(t, "#decisions-count")
		bs, _ := cl.Budgets(ctx, false)
		var specs []client.BudgetSpec
		for _, x := range bs.Budgets {
			specs = append(specs, client.BudgetSpec{Path: x.Path, Share: x.Share})
		}
		wcl, _ := client.New(s.HTTPAddr(), token, nil)
		if _, err := wcl.ApplyBudgets(ctx, &client.BudgetsApply{Revision: "live-1", Budgets: specs}); err != nil {
			t.Fatal(err)
		}
		if _, err := poll[bool](b, `document.querySelector('#decisions-table').innerText.includes('live-1')`); err != nil {
			t.Errorf("a new budgets decision did not appear without a reload (count was %q, now %q): %v", before, b.text(t, "#decisions-count"), err)
		}
		b.noErrors(t)
	})
}
