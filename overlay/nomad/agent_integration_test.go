package nomad

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"

	"github.com/allot-sched/allot/overlay/nomad/nomadtest"
)

// TestAgent drives a real `nomad agent -dev` (NOMAD_BIN or PATH). The event
// buffer is small so that a short outage can outrun it and force a rebuild.
func TestAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("skip: -short")
	}
	agent := nomadtest.Start(t, nomadtest.Options{ExtraHCL: "server {\n  event_buffer_size = 8\n}\n"})
	client := agent.Client(t)
	t.Run("Preflight", func(t *testing.T) { testPreflight(t, client) })
	t.Run("WatchLifecycle", func(t *testing.T) { testWatchLifecycle(t, client) })
	t.Run("PriorityInPlace", func(t *testing.T) { testPriorityInPlace(t, client) })
	t.Run("CASConflict", func(t *testing.T) { testCASConflict(t, client) })
	t.Run("MigrateStop", func(t *testing.T) { testMigrateStop(t, client) })
	t.Run("StreamCut", func(t *testing.T) { testStreamCut(t, client, strings.TrimPrefix(agent.Addr, "http://")) })
}

const sleepJobHCL = `job %q {
  type     = "batch"
  priority = %d
  reschedule {
    attempts  = 0
    unlimited = false
  }
  group "g" {
    count = %d
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "sleep" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
      kill_timeout = "1s"
      resources {
        cpu    = 100
        memory = 32
      }
    }
  }
}
`

// register submits a sleep job from HCL, keeping the source as Nomad's job
// submission (what `nomad job run` does).
func register(t *testing.T, c *api.Client, id string, priority, count int) {
	t.Helper()
	src := fmt.Sprintf(sleepJobHCL, id, priority, count)
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: src, Canonicalize: true})
	if err != nil {
		t.Fatalf("parse job %s: %v", id, err)
	}
	_, _, err = c.Jobs().RegisterOpts(job, &api.RegisterOptions{
		Submission: &api.JobSubmission{Source: src, Format: "hcl2"},
	}, nil)
	if err != nil {
		t.Fatalf("register job %s: %v", id, err)
	}
}

func jobAllocs(t *testing.T, c *api.Client, id string) []*api.AllocationListStub {
	t.Helper()
	allocs, _, err := c.Jobs().Allocations(id, true, nil)
	if err != nil {
		t.Fatalf("allocations of %s: %v", id, err)
	}
	return allocs
}

func running(allocs []*api.AllocationListStub) []*api.AllocationListStub {
	var out []*api.AllocationListStub
	for _, a := range allocs {
		if a.ClientStatus == "running" && a.DesiredStatus == "run" {
			out = append(out, a)
		}
	}
	return out
}

// eventually polls cond until it holds or the deadline passes (Nomad is a
// real process; there is nothing to wait on but its API).
func eventually(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s; last: %s", what, limit, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitRunning(t *testing.T, c *api.Client, id string, n int) []*api.AllocationListStub {
	t.Helper()
	var got []*api.AllocationListStub
	eventually(t, 60*time.Second, fmt.Sprintf("job %s has %d running allocations", id, n), func() (bool, string) {
		got = running(jobAllocs(t, c, id))
		return len(got) == n, fmt.Sprintf("%d running", len(got))
	})
	return got
}

func startWatcher(t *testing.T, c *api.Client, cfg WatchConfig) (*View, *Watcher) {
	t.Helper()
	v := NewView()
	w := NewWatcher(c, v, cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("watcher ended with %v, want context.Canceled", err)
		}
	})
	return v, w
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// waitView waits, on the view's notifications, until cond holds.
func waitView(t *testing.T, v *View, limit time.Duration, what string, cond func(State) bool) State {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		s := v.State()
		if cond(s) {
			return s
		}
		select {
		case <-v.Changed():
		case <-timer.C:
			t.Fatalf("view: %s: not true after %s (index %d, %d jobs, %d allocs)", what, limit, s.Index, len(s.Jobs), len(s.Allocs))
		}
	}
}

func runningInView(s State, id string) int {
	n := 0
	for _, a := range s.Allocs {
		if a.Job.ID == id && a.Running() {
			n++
		}
	}
	return n
}

func testPreflight(t *testing.T, c *api.Client) {
	ctx := context.Background()
	_, err := Preflight(ctx, c, false)
	if !errors.Is(err, ErrPreemptionOff) || !strings.Contains(err.Error(), "-preempt-batch-scheduler=true -preempt-service-scheduler=true") {
		t.Fatalf("preflight with preemption off = %v, want ErrPreemptionOff naming the set-config command", err)
	}
	r, err := Preflight(ctx, c, true)
	if err != nil || !r.PreemptionEnabled {
		t.Fatalf("preflight managing the scheduler config = %+v, %v; want preemption turned on", r, err)
	}
	if !strings.HasPrefix(r.Version, "2.") && !strings.HasPrefix(r.Version, "1.") {
		t.Errorf("version %q, want a Nomad version", r.Version)
	}
	r, err = Preflight(ctx, c, false)
	if err != nil || r.PreemptionEnabled || r.ACLs {
		t.Fatalf("preflight after = %+v, %v; want ok, nothing changed, ACLs off", r, err)
	}
	t.Logf("nomad %s", r.Version)
}

func testWatchLifecycle(t *testing.T, c *api.Client) {
	v, w := startWatcher(t, c, WatchConfig{})
	waitView(t, v, 30*time.Second, "synced with one ready node", func(s State) bool {
		return s.Synced && len(s.Nodes) == 1
	})
	register(t, c, "watch", 50, 2)
	s := waitView(t, v, 60*time.Second, "job watch with 2 running allocations", func(s State) bool {
		return runningInView(s, "watch") == 2
	})
	j := s.Jobs[JobKey{"default", "watch"}]
	if j.Priority != 50 || j.Type != "batch" || len(j.Groups) != 1 || j.Groups[0].Count != 2 {
		t.Errorf("job in view = %+v, want batch, priority 50, one group of 2", j)
	}
	for _, a := range s.AllocsOf(j.Key) {
		if a.StartedAt.IsZero() || a.NodeID == "" {
			t.Errorf("running allocation %s has no start time or node: %+v", a.ID, a)
		}
	}
	if _, _, err := c.Jobs().Deregister("watch", false, nil); err != nil {
		t.Fatal(err)
	}
	waitView(t, v, 60*time.Second, "job watch stopped and its allocations terminal", func(s State) bool {
		j, ok := s.Jobs[JobKey{"default", "watch"}]
		n := 0
		for _, a := range s.AllocsOf(JobKey{"default", "watch"}) {
			if a.Terminal() && a.ClientStatus == "complete" {
				n++
			}
		}
		return ok && j.Stop && n == 2
	})
	if w.Frames() == 0 {
		t.Errorf("no event frame applied: the view came from list endpoints only")
	}
	t.Logf("frames %d, resyncs %d", w.Frames(), w.Resyncs())
}

func testPriorityInPlace(t *testing.T, c *api.Client) {
	register(t, c, "inplace", 50, 2)
	before := waitRunning(t, c, "inplace", 2)
	job, _, err := c.Jobs().Info("inplace", nil)
	if err != nil {
		t.Fatal(err)
	}
	ap := NewApplier(c, ApplyConfig{}, nil)
	out := ap.Apply(context.Background(), []Op{{Kind: OpSetPriority, Job: JobKey{"default", "inplace"}, Priority: 70, ModifyIndex: *job.JobModifyIndex}})
	if out[0].Err != nil || out[0].ModifyIndex <= *job.JobModifyIndex {
		t.Fatalf("set priority: %+v, want success with a newer JobModifyIndex", out[0])
	}
	after, _, err := c.Jobs().Info("inplace", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *after.Priority != 70 || *after.Version != *job.Version+1 {
		t.Errorf("job after = priority %d version %d; want 70, version %d", *after.Priority, *after.Version, *job.Version+1)
	}
	// In place: the same allocations keep running, not restarted, and carry the new priority.
	eventually(t, 30*time.Second, "allocations updated in place to priority 70", func() (bool, string) {
		for _, b := range before {
			a, _, err := c.Allocations().Info(b.ID, nil)
			if err != nil {
				return false, err.Error()
			}
			if a.ClientStatus != "running" || a.DesiredStatus != "run" || *a.Job.Priority != 70 {
				return false, fmt.Sprintf("alloc %s %s/%s priority %d", a.ID, a.DesiredStatus, a.ClientStatus, *a.Job.Priority)
			}
			if !a.TaskStates["sleep"].StartedAt.Equal(b.TaskStates["sleep"].StartedAt) || a.TaskStates["sleep"].Restarts != 0 {
				return false, fmt.Sprintf("alloc %s restarted: started %s, was %s", a.ID, a.TaskStates["sleep"].StartedAt, b.TaskStates["sleep"].StartedAt)
			}
		}
		return true, ""
	})
	if n := len(jobAllocs(t, c, "inplace")); n != 2 {
		t.Errorf("job has %d allocations after the priority change, want the same 2", n)
	}
	sub, _, err := c.Jobs().Submission("inplace", int(*after.Version), nil)
	if err != nil || sub == nil || !strings.Contains(sub.Source, `job "inplace"`) {
		t.Errorf("submission of the new version = %+v, %v; want the user's HCL source kept", sub, err)
	}
}

func testCASConflict(t *testing.T, c *api.Client) {
	register(t, c, "cas", 50, 1)
	waitRunning(t, c, "cas", 1)
	job, _, err := c.Jobs().Info("cas", nil)
	if err != nil {
		t.Fatal(err)
	}
	read := *job.JobModifyIndex
	register(t, c, "cas", 60, 1) // the user's `nomad job run` with a new priority
	ap := NewApplier(c, ApplyConfig{}, nil)
	out := ap.Apply(context.Background(), []Op{
		{Kind: OpSetPriority, Job: JobKey{"default", "cas"}, Priority: 80, ModifyIndex: read},
		{Kind: OpStop, Job: JobKey{"default", "cas"}, Allocs: []string{"never-sent"}},
	})
	if !errors.Is(out[0].Err, ErrConflict) {
		t.Fatalf("stale priority write = %v, want ErrConflict", out[0].Err)
	}
	if !errors.Is(out[1].Err, ErrSkipped) {
		t.Errorf("stop after a failed priority write = %v, want ErrSkipped", out[1].Err)
	}
	now, _, _ := c.Jobs().Info("cas", nil)
	if *now.Priority != 60 {
		t.Errorf("priority after the conflict = %d, want the user's 60", *now.Priority)
	}
	// The server-side check-and-set holds too: a write racing past the read
	// is refused by Nomad itself.
	_, err = ap.SetPriority(context.Background(), JobKey{"default", "cas"}, 80, *now.JobModifyIndex)
	if err != nil {
		t.Fatalf("write at the current index: %v", err)
	}
	now.Priority = ptr(90)
	_, _, err = c.Jobs().RegisterOpts(now, &api.RegisterOptions{EnforceIndex: true, ModifyIndex: *now.JobModifyIndex}, nil)
	if err == nil || !strings.Contains(err.Error(), "conflicting job modify index") {
		t.Errorf("register at a stale index = %v, want Nomad's conflicting job modify index error", err)
	}
}

func testMigrateStop(t *testing.T, c *api.Client) {
	register(t, c, "migrate", 50, 1)
	old := waitRunning(t, c, "migrate", 1)[0]
	ap := NewApplier(c, ApplyConfig{}, nil)
	out := ap.Apply(context.Background(), []Op{{Kind: OpStop, Job: JobKey{"default", "migrate"}, Allocs: []string{old.ID}}})
	if out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	var repl *api.AllocationListStub
	eventually(t, 60*time.Second, "a replacement with the same name running", func() (bool, string) {
		for _, a := range running(jobAllocs(t, c, "migrate")) {
			if a.ID != old.ID {
				repl = a
				return true, ""
			}
		}
		return false, "no replacement yet"
	})
	if repl.Name != old.Name {
		t.Errorf("replacement name %q, want %q", repl.Name, old.Name)
	}
	if repl.RescheduleTracker != nil && len(repl.RescheduleTracker.Events) > 0 {
		t.Errorf("replacement spent a reschedule attempt: %+v", repl.RescheduleTracker.Events)
	}
	o, _, err := c.Allocations().Info(old.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.DesiredStatus != "stop" || o.ClientStatus != "complete" {
		t.Errorf("stopped allocation is %s/%s, want stop/complete", o.DesiredStatus, o.ClientStatus)
	}
	job, _, _ := c.Jobs().Info("migrate", nil)
	if *job.Status == "dead" {
		t.Errorf("job went dead after a migrate-stop; want it running again")
	}
}

func testStreamCut(t *testing.T, c *api.Client, target string) {
	proxy := newCutProxy(t, target)
	pc, err := api.NewClient(&api.Config{Address: proxy.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := WatchConfig{RetryMin: 100 * time.Millisecond, RetryMax: 500 * time.Millisecond, ConfirmTimeout: time.Second}
	v, w := startWatcher(t, pc, cfg)
	waitView(t, v, 30*time.Second, "synced", func(s State) bool { return s.Synced })
	register(t, c, "cut-warm", 50, 1)
	waitView(t, v, 60*time.Second, "cut-warm running in the view", func(s State) bool { return runningInView(s, "cut-warm") == 1 })

	// A short cut: the last frame is still in Nomad's buffer, so the stream
	// resumes exactly; nothing needs rebuilding.
	resyncs := w.Resyncs()
	proxy.Cut()
	register(t, c, "cut-short", 50, 1)
	proxy.Restore()
	waitView(t, v, 60*time.Second, "cut-short running in the view after a short cut", func(s State) bool {
		return runningInView(s, "cut-short") == 1
	})
	t.Logf("short cut: resyncs %d -> %d", resyncs, w.Resyncs())

	// A long cut: more raft entries than the 8-item event buffer holds pass
	// while the watcher is away, so it must rebuild from the list endpoints.
	resyncs = w.Resyncs()
	proxy.Cut()
	for i := 0; i < 4; i++ {
		register(t, c, fmt.Sprintf("cut-long-%d", i), 50, 1)
	}
	waitRunning(t, c, "cut-long-3", 1)
	if _, _, err := c.Jobs().Deregister("cut-warm", true, nil); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	s := waitView(t, v, 60*time.Second, "every cut-long job running and cut-warm purged", func(s State) bool {
		for i := 0; i < 4; i++ {
			if runningInView(s, fmt.Sprintf("cut-long-%d", i)) != 1 {
				return false
			}
		}
		_, purged := s.Jobs[JobKey{"default", "cut-warm"}]
		return !purged
	})
	if w.Resyncs() <= resyncs {
		t.Errorf("resyncs %d -> %d: a gap past the event buffer must rebuild from the list endpoints", resyncs, w.Resyncs())
	}
	// The view matches Nomad's own lists.
	allocs, _, _ := c.Allocations().List(nil)
	for _, a := range allocs {
		got, ok := s.Allocs[a.ID]
		if !ok {
			t.Errorf("allocation %s (%s) missing from the view", a.ID, a.Name)
			continue
		}
		if got.ClientStatus != a.ClientStatus && a.ModifyIndex <= s.Index {
			t.Errorf("allocation %s: view says %s, Nomad %s", a.ID, got.ClientStatus, a.ClientStatus)
		}
	}
}
