package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/allot-sched/allot/ui/uitest"
)

// TestUIAgainstNomad drives a real Nomad (8 fake H100s through allot-nvml)
// through protection, time slicing and a requeue, then opens every page of
// the web UI in headless Chromium: the pages show what Nomad and allot did,
// and their screenshots (in $ALLOT_UI_ARTIFACTS, or a temporary folder)
// are the README's.
func TestUIAgainstNomad(t *testing.T) {
	if uitest.Chromium() == "" { // before starting Nomad for nothing
		t.Skip("skip: no chromium found (apt-get install -y chromium, or set ALLOT_CHROMIUM)")
	}
	c := startGPUCluster(t)
	al := startAllot(t, c, allotOptions{})
	now := time.Now()
	al.seedUsage("lab/a", 8, now.Add(-2*time.Hour), now.Add(-time.Hour))
	c.register(t, gpuJob{ID: "olmo-pretrain", Budget: "lab/a", MinRuntime: "15s", GPUs: 8})
	v := c.waitRunning(t, "olmo-pretrain", 1, 60*time.Second)[0]
	c.waitLevel(t, "olmo-pretrain", bands.Protected, "protected", 10*time.Second)
	c.register(t, gpuJob{ID: "eval-sweep", Budget: "lab/b", MinRuntime: "30s", GPUs: 8, Sleep: 6})
	c.waitRunning(t, "eval-sweep", 1, 60*time.Second)
	again := c.waitRunning(t, "olmo-pretrain", 1, 90*time.Second)[0]
	if again.ID == v.ID {
		t.Fatalf("olmo-pretrain still on its first allocation")
	}
	// Something waits behind it: a second job of lab/a.
	c.register(t, gpuJob{ID: "olmo-ablation", Budget: "lab/a", MinRuntime: "1m", GPUs: 8})
	waitFor(t, 30*time.Second, "olmo-ablation in the queue", func() (bool, error) {
		q := al.Srv.FSM().Read().QueueEntry("default/olmo-ablation")
		return q != nil && q.Position > 0, nil
	})

	ctx, shots := uitest.Browser(t, 1400, 900, 2*time.Minute)
	var consoleErrs []string
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				consoleErrs = append(consoleErrs, m.String())
			}
		}
	}()
	base := "http://" + al.Srv.HTTPAddr() + "/ui/"
	open := func(route, page string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+route)); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`!!(window.allotReady && window.allotReady.page === %q)`, page),
			chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
		if err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(shots, "nomad-"+page+".png")
		if err := os.WriteFile(name, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d KB", name, len(png)/1024)
		return text
	}
	for _, tc := range []struct {
		route, page string
		want        []string
	}{
		{"#/queue", "queue", []string{"default/olmo-ablation", "default/olmo-pretrain", "lab/a", "pending", "protected"}},
		{"#/job/default%2Folmo-pretrain", "job", []string{"requeued", "stopped", "time-slicing", "for default/eval-sweep", v.ID[:8],
			"When it was stopped, that budget ranked #1 among budgets, most owed first (served 0.00), this job's budget #2 (served 2.00)."}},
		{"#/nodes", "nodes", []string{"8 / 8", "default/olmo-pretrain", "protected until", "H100", ": healthy"}},
		{"#/decisions", "decisions", []string{"default/olmo-pretrain", fmt.Sprintf("priority %d", bands.Protected)}},
		{"#/budgets?range=6h", "budgets", []string{"lab/a", "lab/b", "50.0%"}},
	} {
		text := open(tc.route, tc.page)
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %q:\n%s", tc.route, w, text)
			}
		}
	}
	// Every allocation of the job after the first was a requeue.
	placements := 0
	for _, a := range al.Srv.FSM().Read().JobAllocs("default/olmo-pretrain") {
		if !a.StartedAt.IsZero() {
			placements++
		}
	}
	if text := open("#/job/default%2Folmo-pretrain", "job"); !strings.Contains(text, fmt.Sprintf("over %d placements, %d requeues", placements, placements-1)) {
		t.Errorf("job page lacks %d placements and %d requeues:\n%s", placements, placements-1, text)
	}
	if len(consoleErrs) > 0 {
		t.Errorf("browser console: %v", consoleErrs)
	}
}
