package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// noticeScript is a raw_exec task that keeps a step counter in $STATE_DIR:
// on start it restores the counter saved there (and records what it read in
// restored-<alloc>), on SIGUSR1 it saves the counter (a checkpoint) and
// records when the signal came (signal-<alloc>, and one line per signal in
// signals-<alloc>, to count them), and it goes on counting
// until it is stopped. It waits on its sleep so that a trap runs at once
// (a signal interrupts wait, not a foreground sleep). The files the test
// polls are written aside and renamed into place: `date > file` creates the
// file empty before date writes, and the test read "" there (1 of 3 runs
// of TestNoticeSessionKeepsState under load).
const noticeScript = `
dir="$STATE_DIR"
n=0
if [ -f "$dir/ckpt" ]; then
  n=$(cat "$dir/ckpt")
  echo "$n" > "$dir/restored.tmp"; mv "$dir/restored.tmp" "$dir/restored-$NOMAD_ALLOC_ID"
fi
trap 'date +%s.%N > "$dir/signal.tmp"; mv "$dir/signal.tmp" "$dir/signal-$NOMAD_ALLOC_ID"; date +%s.%N >> "$dir/signals-$NOMAD_ALLOC_ID"; echo "$n" > "$dir/ckpt.tmp"; mv "$dir/ckpt.tmp" "$dir/ckpt"' USR1
trap 'exit 0' INT TERM
while :; do
  n=$((n + 1))
  sleep 0.2 &
  wait $!
done
`

// noticeJob is a job whose task runs noticeScript, with a checkpoint notice.
func noticeJob(id, budget, minRuntime, notice, class, dir string, gpus int) map[string]any {
	body := jobBody(gpuJob{ID: id, Budget: budget, MinRuntime: minRuntime, GPUs: gpus})
	job := body["Job"].(map[string]any)
	meta := job["Meta"].(map[string]string)
	meta["checkpoint_signal"], meta["checkpoint_notice"] = "SIGUSR1", notice
	if class != "" {
		meta["class"] = class
	}
	task := job["TaskGroups"].([]any)[0].(map[string]any)["Tasks"].([]any)[0].(map[string]any)
	task["Config"] = map[string]any{"command": "/bin/sh", "args": []string{"-c", noticeScript}}
	task["Env"] = map[string]string{"STATE_DIR": dir}
	return body
}

// readUnix reads a `date +%s.%N` file.
func readUnix(t *testing.T, path string) (time.Time, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("%s: %q is not a time", path, b)
	}
	return time.Unix(0, int64(f*1e9)), true
}

// runNoticeStop runs a job with a notice on the 8 GPUs, past its window, and
// a less served budget's job that time slicing stops it for. It checks that
// the signal came at least the notice before the stop, that the job it was
// stopped for started within notice + 5 s of the signal, and that the
// replacement restored the checkpoint saved on the signal; it returns the
// step saved and the step restored. With down > 0, the allot server is
// stopped just after the signal and started again down later (same
// data_dir: a new leader with only the replicated state): the notice must
// survive it (one signal, the stop no earlier than its deadline, or at
// once when allot comes back after it, the same job waiting for it, and
// explain still telling it).
func runNoticeStop(t *testing.T, class string, down time.Duration) (saved, restored int) {
	restart := down > 0
	c := startGPUCluster(t)
	opts := allotOptions{}
	if restart {
		opts.DataDir = t.TempDir()
	}
	al := startAllot(t, c, opts)
	now := time.Now()
	al.seedUsage("lab/a", 8, now.Add(-2*time.Hour), now.Add(-time.Hour))
	dir := t.TempDir()
	const notice = 10 * time.Second
	if err := c.Put("/v1/jobs", noticeJob("saver", "lab/a", "10s", notice.String(), class, dir, 8), nil); err != nil {
		t.Fatal(err)
	}
	v := c.waitRunning(t, "saver", 1, 60*time.Second)[0]
	c.waitLevel(t, "saver", bands.Protected, "protected", 10*time.Second)
	c.register(t, gpuJob{ID: "pending", Budget: "lab/b", MinRuntime: "30s", GPUs: 8, Sleep: 6})

	sigFile := filepath.Join(dir, "signal-"+v.ID)
	var sigAt time.Time
	waitFor(t, 60*time.Second, "the checkpoint signal", func() (bool, error) {
		var ok bool
		sigAt, ok = readUnix(t, sigFile)
		return ok, nil
	})
	t.Logf("signal %s after the window's end", sigAt.Sub(v.started().Add(10*time.Second)).Round(time.Millisecond))
	// While the notice runs the job keeps its GPUs and its running
	// priority, and allot explain says when it stops and for whom.
	if rs := c.running(t, "saver"); len(rs) != 1 || rs[0].ID != v.ID {
		t.Fatalf("saver moved at its signal: running %+v", rs)
	}
	waitFor(t, 5*time.Second, "the notice in saver's explanation", func() (bool, error) {
		q := al.Srv.FSM().Read().QueueEntry("default/saver")
		return q != nil && strings.Contains(q.Explanation, "notice sent at ") && strings.Contains(q.Explanation, "for job default/pending") &&
			q.Band == "running", nil
	})
	if p := c.job(t, "saver").Priority; p != 90 {
		t.Fatalf("saver at priority %d during its notice, want the running band's 90", p)
	}
	up := sigAt // when allot last came up before the stop
	if restart {
		before := noticeText(al.Srv.FSM().Read().QueueEntry("default/saver").Explanation)
		al.Stop()
		stopped := time.Now()
		time.Sleep(down) // no allot at all for a while
		al = startAllot(t, c, opts)
		up = time.Now()
		t.Logf("allot restarted during the notice: down %s after the signal, up %s after it", stopped.Sub(sigAt).Round(time.Millisecond),
			up.Sub(sigAt).Round(time.Millisecond))
		if up.After(sigAt.Add(notice)) {
			t.Logf("the restart outlasted the notice: the stop is due as soon as allot leads again")
		}
		// Once the new leader has run a pass, saver's queue row is the one
		// it planned (a pass rewrites the queue whenever it differs). The
		// test waits for the leader loop's own pass: a pass run from here,
		// with another context, would be another leadership term to the
		// reconciler.
		al.waitPass(t)
		after := "(no queue row)" // saver's allocation may be between its stop and its replacement
		if q := al.Srv.FSM().Read().QueueEntry("default/saver"); q != nil {
			after = noticeText(q.Explanation)
		}
		if after != before && time.Now().Before(sigAt.Add(notice)) {
			t.Fatalf("saver's notice after the restart %q, before it %q", after, before)
		}
		t.Logf("explain after the restart: %s", after)
	}
	p := c.waitRunning(t, "pending", 1, notice+30*time.Second)[0]
	old := c.alloc(t, "saver", v.ID)
	stop := old.killedAt()
	if stop.IsZero() {
		t.Fatalf("saver's allocation %s was never killed (desired %s %q)", v.ID, old.DesiredStatus, old.DesiredDescription)
	}
	t.Logf("signal -> stop %s (notice %s); signal -> beneficiary started %s; desired %s %q", stop.Sub(sigAt).Round(time.Millisecond),
		notice, p.started().Sub(sigAt).Round(time.Millisecond), old.DesiredStatus, old.DesiredDescription)
	// The stop is issued at the deadline, which counts from the pass that
	// sent the signal; the signal itself lands a few ms after that.
	if got := stop.Sub(sigAt); got < notice-250*time.Millisecond {
		t.Fatalf("stopped %s after the signal, want at least the notice %s", got, notice)
	}
	// The beneficiary starts within notice + 5 s of the signal; after a
	// restart that outlasted the notice, within 5 s of allot leading again.
	due := sigAt.Add(notice)
	if up.After(due) {
		due = up
	}
	if got := p.started().Sub(due); got > 5*time.Second {
		t.Fatalf("the job the stop made room for started %s after the signal, want within notice + 5s (%s)", p.started().Sub(sigAt), due.Add(5*time.Second).Sub(sigAt))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "signals-"+v.ID)); err != nil || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("saver's allocation got %d checkpoint signals (%q, %v), want exactly one", strings.Count(string(b), "\n"), b, err)
	}
	if j := c.job(t, "saver"); j.Status == "dead" {
		t.Fatalf("saver is dead; want it requeued")
	}
	b, err := os.ReadFile(filepath.Join(dir, "ckpt"))
	if err != nil {
		t.Fatalf("no checkpoint saved on the signal: %v", err)
	}
	saved, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	// pending finishes (sleep 6); the replacement runs and restores.
	again := c.waitRunning(t, "saver", 1, 90*time.Second)[0]
	if again.ID == v.ID {
		t.Fatalf("saver running again as the same allocation %s", v.ID)
	}
	waitFor(t, 20*time.Second, "the replacement to restore the checkpoint", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, "restored-"+again.ID))
		if err != nil {
			return false, nil
		}
		restored, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil, err
	})
	// allot told the job's history: a notice, then the stop.
	var kinds []string
	notices := 0
	for _, d := range al.Srv.FSM().Read().Decisions(0) {
		if d.JobID == "default/saver" && (d.Kind == "notice" || d.Kind == "preempt") {
			kinds = append(kinds, d.Kind)
		}
		if d.JobID == "default/saver" && d.Kind == "notice" && d.AllocID == v.ID {
			notices++
		}
	}
	if len(kinds) < 2 || kinds[0] != "notice" {
		t.Fatalf("saver's decisions %v, want a notice before the stop", kinds)
	}
	if notices != 1 {
		t.Fatalf("allot recorded %d notices to saver's allocation %s, want one (decisions %v)", notices, v.ID, kinds)
	}
	return saved, restored
}

// A raw_exec job that traps its checkpoint_signal is stopped for time
// slicing only its checkpoint_notice after the signal, and its replacement
// reads the checkpoint it wrote.
func TestNoticeBeforeTimeSlicingStop(t *testing.T) {
	saved, restored := runNoticeStop(t, "", 0)
	if restored != saved || saved == 0 {
		t.Fatalf("replacement restored step %d, the signal saved %d", restored, saved)
	}
}

// A restorable session (class = "session") loses no state across a stop:
// its next placement finds exactly what it saved on the signal.
func TestNoticeSessionKeepsState(t *testing.T) {
	saved, restored := runNoticeStop(t, "session", 0)
	if restored != saved || saved == 0 {
		t.Fatalf("session restored step %d, it saved %d: state lost", restored, saved)
	}
	t.Logf("session saved step %d and restored it", saved)
}

// A notice in flight survives a restart of the allot server (a new leader
// with nothing but the replicated state): the job is signalled once, it is
// stopped no earlier than the notice's end, the job it was stopped for
// starts, and the replacement restores the checkpoint. allot is down 3 s of
// the 10 s notice, or longer than the notice (then the stop is due as soon
// as it leads again).
func TestNoticeSurvivesServerRestart(t *testing.T) {
	for _, down := range []time.Duration{3 * time.Second, 12 * time.Second} {
		t.Run("down "+down.String(), func(t *testing.T) {
			saved, restored := runNoticeStop(t, "session", down)
			if restored != saved || saved == 0 {
				t.Fatalf("restored step %d, the signal saved %d", restored, saved)
			}
		})
	}
}

// noticeText is the notice part of an explanation ("notice sent at ...;
// stop at ... for job ..."), or the whole explanation when it has none.
func noticeText(expl string) string {
	if i := strings.Index(expl, "notice sent at "); i >= 0 {
		return expl[i:]
	}
	return expl
}

// waitPass waits until the allot server's leader loop has run a pass that
// succeeded (allot_reconcile_passes_total{result="ok"} above 0).
func (a *allot) waitPass(t *testing.T) {
	t.Helper()
	waitFor(t, 10*time.Second, "a reconcile pass of the new leader", func() (bool, error) {
		for _, line := range strings.Split(allotMetrics(t, a), "\n") {
			if v, ok := strings.CutPrefix(line, `allot_reconcile_passes_total{result="ok"} `); ok {
				return v != "0", nil
			}
		}
		return false, nil
	})
}
