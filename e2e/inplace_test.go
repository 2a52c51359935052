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
	c, ap := startInplace(t)
	xs := []string{"x1", "x2", "x3", "x4"}
	defer func() {
		if t.Failed() {
			for _, id := range append([]string{"r", "b"}, xs...) {
				for _, a := range c.allocs(t, id) {
					t.Logf("%s %s on %s: desired %s, client %s %q", id, a.ID[:8], a.NodeName, a.DesiredStatus, a.ClientStatus, a.DesiredDescription)
				}
			}
		}
	}()
	c.register(t, gpuJob{ID: "r", Priority: 90, Node: "gpu-client-2", GPUs: 8})
	for _, x := range xs {
		c.register(t, gpuJob{ID: x, Priority: 90, Node: "gpu-client-1", GPUs: 2, SlowExit: true})
	}
	waitFor(t, 60*time.Second, "r, x1-x4 running", func() (bool, error) {
		for _, id := range append([]string{"r"}, xs...) {
			if as := live(c.allocs(t, id)); len(as) != 1 || as[0].ClientStatus != "running" {
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
		ops = append(ops, nomad.Op{Kind: nomad.OpSetPriority, Job: nomad.JobKey{Namespace: "default", ID: x}, Priority: 70,
			ModifyIndex: c.job(t, x).JobModifyIndex, Placed: true})
	}
	for _, o := range ap.Apply(context.Background(), ops) {
		if o.Err != nil {
			t.Fatalf("%s %s: %v", o.Op.Kind, o.Op.Job, o.Err)
		}
	}
	c.register(t, gpuJob{ID: "b", Priority: 89, GPUs: 8})
	var placed string
	waitFor(t, 10*time.Second, "b placed on gpu-client-1", func() (bool, error) {
		as := live(c.allocs(t, "b"))
		if len(as) == 1 && as[0].NodeName == "gpu-client-1" {
			placed = as[0].ID
			return true, nil
		}
		return false, nil
	})
	stillRunning := false
	for _, a := range c.allocs(t, "x1") {
		stillRunning = stillRunning || a.DesiredStatus != "run" && a.ClientStatus == "running"
	}
	if !stillRunning {
		t.Fatal("x1's stopped task exited before b's write: the case is not set up (its task should take 20 s)")
	}
	key := nomad.JobKey{Namespace: "default", ID: "b"}
	if _, err := ap.SetPriority(context.Background(), key, 100, c.job(t, "b").JobModifyIndex); !errors.Is(err, nomad.ErrWouldReplace) {
		t.Fatalf("write b 100 while the stopped tasks run: %v, want ErrWouldReplace", err)
	} else {
		t.Logf("refused: %v", err)
	}
	time.Sleep(2 * time.Second)
	if as := live(c.allocs(t, "b")); len(as) != 1 || as[0].ID != placed {
		t.Fatalf("b's allocation %s was replaced: live %v", placed, as)
	}
	if as := live(c.allocs(t, "r")); len(as) != 1 {
		t.Fatalf("r was preempted: live %v", as)
	}
	if p := c.job(t, "b").Priority; p != 89 {
		t.Fatalf("b at %d, want 89 (not written)", p)
	}
	// Once the stopped tasks exit, the write is in place.
	waitFor(t, 60*time.Second, "the write of b 100 made", func() (bool, error) {
		_, err := ap.SetPriority(context.Background(), key, 100, c.job(t, "b").JobModifyIndex)
		if errors.Is(err, nomad.ErrWouldReplace) {
			return false, nil
		}
		return err == nil, err
	})
	time.Sleep(2 * time.Second)
	if as := live(c.allocs(t, "b")); len(as) != 1 || as[0].ID != placed {
		t.Fatalf("b's allocation %s was replaced by the write made after the exits: live %v", placed, as)
	}
	if p := c.job(t, "b").Priority; p != 100 {
		t.Fatalf("b at %d, want 100", p)
	}
	if as := live(c.allocs(t, "r")); len(as) != 1 {
		t.Fatalf("r was preempted: live %v", as)
	}
}

// startInplace starts a Nomad server and two GPU clients with preemption
// on, and an adapter's Applier for it; the cluster is read and written
// through the server.
func startInplace(t *testing.T) (*gpuCluster, *nomad.Applier) {
	t.Helper()
	nc := startNomadCluster(t, 2)
	nc.Server.preemptionOn(t)
	cl, err := nomad.NewClientFor(nc.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return &gpuCluster{agent: nc.Server}, nomad.NewApplier(cl, nomad.ApplyConfig{}, nil)
}

// live are the allocations Nomad means to run, placed or running.
func live(as []nomadAlloc) []nomadAlloc {
	var out []nomadAlloc
	for _, a := range as {
		if a.DesiredStatus == "run" && (a.ClientStatus == "pending" || a.ClientStatus == "running") {
			out = append(out, a)
		}
	}
	return out
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
	c, ap := startInplace(t)
	running := func(id string) int { return len(c.running(t, id)) }
	c.register(t, gpuJob{ID: "r", Priority: 90, Node: "gpu-client-2", GPUs: 8})
	waitFor(t, 60*time.Second, "r running", func() (bool, error) { return running("r") == 1, nil })
	c.register(t, gpuJob{ID: "b", Priority: 60, GPUs: 8})
	waitFor(t, 60*time.Second, "b running on gpu-client-1", func() (bool, error) { return running("b") == 1, nil })
	c.register(t, gpuJob{ID: "c", Priority: 89, Node: "gpu-client-1", GPUs: 8})
	waitFor(t, 60*time.Second, "c running, b preempted", func() (bool, error) { return running("c") == 1 && running("b") == 0, nil })
	key := nomad.JobKey{Namespace: "default", ID: "b"}
	out := ap.Apply(context.Background(), []nomad.Op{{Kind: nomad.OpSetPriority, Job: key, Priority: 100,
		ModifyIndex: c.job(t, "b").JobModifyIndex, Placed: true}})
	if !errors.Is(out[0].Err, nomad.ErrWouldReplace) {
		t.Fatalf("write of b 100 (Placed) after its preemption: %v, want ErrWouldReplace", out[0].Err)
	}
	t.Logf("refused: %v", out[0].Err)
	time.Sleep(2 * time.Second)
	if p := c.job(t, "b").Priority; p != 60 {
		t.Fatalf("b at %d, want 60 (not written)", p)
	}
	if running("r") != 1 {
		t.Fatal("r, running at 90, was preempted")
	}
}
