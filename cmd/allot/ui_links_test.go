package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/ui/uitest"
)

// `allot job history` and `allot usage series` print the new endpoints'
// answers (and -json the same figures); explain and queue link to the UI.
func TestHistorySeriesAndUILinks(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Hour)
	rec := &uitest.Reconciler{}
	s := devServer(t, server.Config{Reconciler: rec, Clock: func() time.Time { return now }})
	if err := uitest.Seed(context.Background(), s, rec, cliToken, now); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALLOT_ADDR", s.HTTPAddr())
	base := "http://" + s.HTTPAddr()

	code, out, errOut := runCLI(t, "job", "history", "default/video-diffusion")
	for _, want := range []string{"Charged:      152.00 GPU-h over 2 placements, 1 requeues", "stopped (time-slicing)", "a1-video",
		"requeued", "[at the stop: default/reasoning-grpo's budget ai2/nlp/reasoning #", "Web UI:       " + base + "/ui/#/job/default%2Fvideo-diffusion"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("job history: %d %q lacks %q\n%s", code, errOut, want, out)
		}
	}
	code, out, _ = runCLI(t, "job", "history", "-json", "video-diffusion")
	var h client.JobHistory
	if code != exitOK || json.Unmarshal([]byte(out), &h) != nil || h.JobID != "default/video-diffusion" || h.Requeues != 1 {
		t.Errorf("job history -json: %d %s", code, out)
	}
	code, _, errOut = runCLI(t, "job", "history", "default/nope")
	if code == exitOK || !strings.Contains(errOut, "not managed") {
		t.Errorf("job history of an unknown job: %d %q", code, errOut)
	}

	code, out, errOut = runCLI(t, "usage", "series", "-budget", "ai2/nlp", "-since", "6h", "-step", "1h")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 8 || !strings.Contains(lines[1], "ai2/nlp/safety (of 3.2)") {
		t.Errorf("usage series: %d %q\n%s\nwant a header, a column line with safety's 3.2-GPU allocation, 6 hourly rows", code, errOut, out)
	}
	code, out, _ = runCLI(t, "usage", "series", "-json", "-budget", "ai2/nlp", "-since", "6h", "-step", "1h")
	var u client.UsageSeries
	if code != exitOK || json.Unmarshal([]byte(out), &u) != nil || len(u.Series) != 4 || len(u.Times) != 6 || u.StepSeconds != 3600 {
		t.Errorf("usage series -json: %d %s", code, out)
	}
	if code, _, errOut := runCLI(t, "usage", "series", "-since", "soon"); code != exitUsage || !strings.Contains(errOut, "-since") {
		t.Errorf("usage series -since soon: %d %q", code, errOut)
	}

	code, out, _ = runCLI(t, "explain", "job", "default/olmo-eval-sweep")
	if code != exitOK || !strings.Contains(out, "Web UI:       "+base+"/ui/#/job/default%2Folmo-eval-sweep\n") ||
		!strings.Contains(out, "Budget page:  "+base+"/ui/#/budgets/ai2%2Fprior%2Folmo%2Fevals\n") {
		t.Errorf("explain lacks the UI links:\n%s", out)
	}
	code, out, _ = runCLI(t, "queue")
	if code != exitOK || !strings.Contains(out, "Web UI: "+base+"/ui/#/queue") {
		t.Errorf("queue lacks the UI link:\n%s", out)
	}
}
