package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/nomad"
)

// TestPriorityWriteNeverReplaces: a priority write must not restart a job.
// Nomad updates an allocation in place only if it still fits its node, and
// counts the GPUs of allocations stopped there whose tasks have not exited
// yet; a job placed on such GPUs (as allot's time slicing and reservations
// place them) is then replaced, and its replacement, placed at the new
// priority, preempts what it may. The fidelity harness saw it on a real
// Nomad: a job written protected (100) a few seconds after its placement
// was replaced and its replacement preempted five jobs running past their
// windows on another node. Here four jobs of two GPUs (x1-x4) on
// gpu-client-1, whose tasks take 20 s to exit, are lowered to 70 and b
// (eight GPUs, 89) preempts them and is placed on their GPUs at once, and the adapter's write
// of b to 100 is refused (nomad.ErrWouldReplace: Nomad's planner says the
// update is destructive) with b's allocation untouched; once the stopped
// tasks exit the same write is made in place (b keeps its allocation).
func TestPriorityWriteNeverReplaces(t *testing.T) {
	c := startNomadCluster(t, 2)
	c.preemptionOn(t)
	cl, err := nomad.NewClientFor(c.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ap := nomad.NewApplier(cl, nomad.ApplyConfig{}, nil)
	xs := []string{"x1", "x2", "x3", "x4"}
	defer func() {
		if t.Failed() {
			for _, id := range append([]string{"r", "b"}, xs...) {
				for _, a := range c.jobAllocs(t, id) {
					t.Logf("%s %s on %s: desired %s, client %s %q", id, a.ID[:8], a.NodeName, a.DesiredStatus, a.ClientStatus, a.DesiredDescription)
				}
			}
		}
	}()
	c.register(t, inplaceJob("r", 90, "gpu-client-2", 8, false))
	for _, x := range xs {
		c.register(t, inplaceJob(x, 90, "gpu-client-1", 2, true))
	}
	waitFor(t, 60*time.Second, "r, x1-x4 running", func() (bool, error) {
		for _, id := range append([]string{"r"}, xs...) {
			if as := c.liveAllocs(t, id); len(as) != 1 || as[0].ClientStatus != "running" {
				return false, nil
			}
		}
		return true, nil
	})
	// x1-x4 lowered a preemption gap below b (through the adapter), and b
	// written to the pending top: Nomad places it on gpu-client-1 at once
	// by preempting them, whose tasks take 20 s to exit (as allot's time
	// slicing and reservations place the job they stop work for on GPUs
	// whose tasks have not exited).
	var ops []nomad.Op
	for _, x := range xs {
		_, idx := c.jobInfo(t, x)
		ops = append(ops, nomad.Op{Kind: nomad.OpSetPriority, Job: nomad.JobKey{Namespace: "default", ID: x}, Priority: 70, ModifyIndex: idx, Placed: true})
	}
	for _, o := range ap.Apply(context.Background(), ops) {
		if o.Err != nil {
			t.Fatalf("%s %s: %v", o.Op.Kind, o.Op.Job, o.Err)
		}
	}
	c.register(t, inplaceJob("b", 89, "", 8, false))
	var placed string
	waitFor(t, 10*time.Second, "b placed on gpu-client-1", func() (bool, error) {
		as := c.liveAllocs(t, "b")
		if len(as) == 1 && as[0].NodeName == "gpu-client-1" {
			placed = as[0].ID
			return true, nil
		}
		return false, nil
	})
	stillRunning := false
	for _, a := range c.jobAllocs(t, "x1") {
		stillRunning = stillRunning || a.DesiredStatus != "run" && a.ClientStatus == "running"
	}
	if !stillRunning {
		t.Fatal("x1's stopped task exited before b's write: the case is not set up (its task should take 20 s)")
	}
	key := nomad.JobKey{Namespace: "default", ID: "b"}
	_, idx := c.jobInfo(t, "b")
	if _, err := ap.SetPriority(context.Background(), key, 100, idx); !errors.Is(err, nomad.ErrWouldReplace) {
		t.Fatalf("write b 100 while the stopped tasks run: %v, want ErrWouldReplace", err)
	} else {
		t.Logf("refused: %v", err)
	}
	time.Sleep(2 * time.Second)
	if as := c.liveAllocs(t, "b"); len(as) != 1 || as[0].ID != placed {
		t.Fatalf("b's allocation %s was replaced: live %v", placed, as)
	}
	if as := c.liveAllocs(t, "r"); len(as) != 1 {
		t.Fatalf("r was preempted: live %v", as)
	}
	if p, _ := c.jobInfo(t, "b"); p != 89 {
		t.Fatalf("b at %d, want 89 (not written)", p)
	}
	// Once the stopped tasks exit, the write is in place.
	waitFor(t, 60*time.Second, "the write of b 100 made", func() (bool, error) {
		_, idx := c.jobInfo(t, "b")
		_, err := ap.SetPriority(context.Background(), key, 100, idx)
		if errors.Is(err, nomad.ErrWouldReplace) {
			return false, nil
		}
		return err == nil, err
	})
	time.Sleep(2 * time.Second)
	if as := c.liveAllocs(t, "b"); len(as) != 1 || as[0].ID != placed {
		t.Fatalf("b's allocation %s was replaced by the write made after the exits: live %v", placed, as)
	}
	if p, _ := c.jobInfo(t, "b"); p != 100 {
		t.Fatalf("b at %d, want 100", p)
	}
	if as := c.liveAllocs(t, "r"); len(as) != 1 {
		t.Fatalf("r was preempted: live %v", as)
	}
}

// inplaceJob is a batch job of one allocation asking gpus GPUs, pinned to
// node when it is not "": with slow, its task ignores SIGINT and SIGTERM
// and runs until Nomad kills it 20 s after a stop (kill_timeout).
func inplaceJob(id string, priority int, node string, gpus int, slow bool) map[string]any {
	kill := time.Second
	args := []string{"-c", "exec sleep 3600"}
	if slow {
		kill = 20 * time.Second
		args = []string{"-c", "trap '' INT TERM; sleep 3600 & wait; sleep 3600"}
	}
	g := map[string]any{"Name": "g", "Count": 1,
		"RestartPolicy":    map[string]any{"Attempts": 0, "Mode": "fail"},
		"ReschedulePolicy": map[string]any{"Attempts": 0, "Unlimited": false},
		"Tasks": []any{map[string]any{"Name": "t", "Driver": "raw_exec", "KillTimeout": int64(kill),
			"Config": map[string]any{"command": "/bin/sh", "args": args},
			"Resources": map[string]any{"CPU": 20, "MemoryMB": 16,
				"Devices": []any{map[string]any{"Name": "nvidia/gpu", "Count": gpus}}}}}}
	if node != "" {
		g["Constraints"] = []any{map[string]any{"LTarget": "${node.unique.name}", "RTarget": node, "Operand": "="}}
	}
	return map[string]any{"Job": map[string]any{"ID": id, "Name": id, "Type": "batch", "Datacenters": []string{"dc1"},
		"Priority": priority, "TaskGroups": []any{g}}}
}

// inplaceAlloc is what the tests read of a job's allocations.
type inplaceAlloc struct {
	ID, NodeName, DesiredStatus, ClientStatus, DesiredDescription string
}

func (c *nomadCluster) jobAllocs(t *testing.T, id string) []inplaceAlloc {
	t.Helper()
	var as []inplaceAlloc
	if err := c.Server.Get("/v1/job/"+id+"/allocations", &as); err != nil {
		t.Fatal(err)
	}
	return as
}

// liveAllocs are the job's allocations Nomad means to run, placed or running.
func (c *nomadCluster) liveAllocs(t *testing.T, id string) []inplaceAlloc {
	t.Helper()
	var out []inplaceAlloc
	for _, a := range c.jobAllocs(t, id) {
		if a.DesiredStatus == "run" && (a.ClientStatus == "pending" || a.ClientStatus == "running") {
			out = append(out, a)
		}
	}
	return out
}

func (c *nomadCluster) register(t *testing.T, body map[string]any) {
	t.Helper()
	if err := c.Server.Put("/v1/jobs", body, nil); err != nil {
		t.Fatalf("register %v: %v", body["Job"].(map[string]any)["ID"], err)
	}
}

func (c *nomadCluster) jobInfo(t *testing.T, id string) (priority int, modifyIndex uint64) {
	t.Helper()
	var j struct {
		Priority       int
		JobModifyIndex uint64
	}
	if err := c.Server.Get("/v1/job/"+id, &j); err != nil {
		t.Fatal(err)
	}
	return j.Priority, j.JobModifyIndex
}

func (c *nomadCluster) preemptionOn(t *testing.T) {
	t.Helper()
	if err := c.Server.Put("/v1/operator/scheduler/configuration", map[string]any{"PreemptionConfig": map[string]any{
		"BatchSchedulerEnabled": true, "ServiceSchedulerEnabled": true, "SystemSchedulerEnabled": true}}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestShieldWriteNeverPlaces: a write allot means to lift a placed job out
// of reach (nomad.Op.Placed) is not made once the job's allocation is gone
// since the decision read it: written to 100 with an allocation to place,
// the job would preempt work running past its window (at 90). The fidelity
// harness saw it on a real Nomad: a job placed, preempted a second later by
// another pending job, then written protected by a decision that had seen
// it placed, preempted a job running at 90 on another node. Here b (60) is
// placed on gpu-client-1 and preempted there by c (89); the adapter's
// write of b to 100 marked Placed is refused (nomad.ErrWouldReplace) and r,
// running at 90 on gpu-client-2, keeps running.
func TestShieldWriteNeverPlaces(t *testing.T) {
	c := startNomadCluster(t, 2)
	c.preemptionOn(t)
	cl, err := nomad.NewClientFor(c.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ap := nomad.NewApplier(cl, nomad.ApplyConfig{}, nil)
	running := func(id string) int {
		n := 0
		for _, a := range c.liveAllocs(t, id) {
			if a.ClientStatus == "running" {
				n++
			}
		}
		return n
	}
	c.register(t, inplaceJob("r", 90, "gpu-client-2", 8, false))
	waitFor(t, 60*time.Second, "r running", func() (bool, error) { return running("r") == 1, nil })
	c.register(t, inplaceJob("b", 60, "", 8, false))
	waitFor(t, 60*time.Second, "b running on gpu-client-1", func() (bool, error) { return running("b") == 1, nil })
	c.register(t, inplaceJob("c", 89, "gpu-client-1", 8, false))
	waitFor(t, 60*time.Second, "c running, b preempted", func() (bool, error) { return running("c") == 1 && running("b") == 0, nil })
	key := nomad.JobKey{Namespace: "default", ID: "b"}
	_, idx := c.jobInfo(t, "b")
	out := ap.Apply(context.Background(), []nomad.Op{{Kind: nomad.OpSetPriority, Job: key, Priority: 100, ModifyIndex: idx, Placed: true}})
	if !errors.Is(out[0].Err, nomad.ErrWouldReplace) {
		t.Fatalf("write of b 100 (Placed) after its preemption: %v, want ErrWouldReplace", out[0].Err)
	}
	t.Logf("refused: %v", out[0].Err)
	time.Sleep(2 * time.Second)
	if p, _ := c.jobInfo(t, "b"); p != 60 {
		t.Fatalf("b at %d, want 60 (not written)", p)
	}
	if running("r") != 1 {
		t.Fatal("r, running at 90, was preempted")
	}
}
