package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// landed is st after ops landed as Nomad applies them: the priorities
// written, and each stopped allocation's replacement placed at once on its
// GPUs (Nomad's eval order: the victim's replacement is placed before the
// job it was stopped for is evaluated).
func landed(st *nomad.State, ops []nomad.Op, at time.Time) {
	for _, o := range ops {
		switch o.Kind {
		case nomad.OpSetPriority:
			j := st.Jobs[o.Job]
			j.Priority, j.JobModifyIndex = o.Priority, o.ModifyIndex+1000
			st.Jobs[o.Job] = j
		case nomad.OpStop:
			for _, id := range o.Allocs {
				a := st.Allocs[id]
				a.DesiredStatus, a.ClientStatus, a.FinishedAt = "stop", "complete", at
				st.Allocs[id] = a
				r := a
				r.ID, r.DesiredStatus, r.ClientStatus, r.StartedAt, r.FinishedAt = id+"-r", "run", "running", at, time.Time{}
				st.Allocs[r.ID] = r
			}
		}
	}
}

// servedFSM is the two-leaf tree of the held-victim tests, lab/a charged 8
// GPUs for an hour two hours before t0, so lab/b is the less served.
func servedFSM(t *testing.T, t0 time.Time) *state.FSM {
	t.Helper()
	fsm := budgetsFSM(t, []budgets.Spec{{Path: "lab"}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}})
	applyEntry(t, fsm, state.AllocUpsertType, state.AllocUpsertRequest{Allocs: []state.Alloc{{ID: "seed", Leaf: "lab/a", GPUs: 8,
		StartedAt: t0.Add(-3 * time.Hour), StoppedAt: t0.Add(-2 * time.Hour)}}})
	applyEntry(t, fsm, state.ChargeType, state.ChargeRequest{Charges: []state.Charge{{Alloc: "seed", Leaf: "lab/a", GPUs: 8,
		From: t0.Add(-3 * time.Hour), To: t0.Add(-2 * time.Hour)}}})
	return fsm
}

// A victim held below the job it made room for stays held across a leader
// change (a new Reconciler, with no memory of its own) and a restart from a
// snapshot: when Nomad placed the victim's replacement first, the new
// leader does not raise it over the waiting job (which could then no longer
// preempt it) but evaluates that job, as the first leader would have; the
// hold ends when that job places.
func TestHeldVictimSurvivesLeaderChange(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	fsm := servedFSM(t, t0)
	victim := gpuJob("default", "victim", "default", 1, 8, map[string]string{"budget": "lab/a", "min_runtime": "10m"})
	pending := gpuJob("default", "pending", "default", 1, 8, map[string]string{"budget": "lab/b", "min_runtime": "30m"})
	st := stateOf([]nomad.Job{victim, pending}, []nomad.Alloc{runningAlloc("v1", "victim", 8, t0.Add(-time.Hour))},
		[]nomad.Node{{ID: "n1", Pool: "default", Status: "ready", Eligible: true, GPUs: []nomad.GPUModel{{Model: "H100", Total: 8, Healthy: 8}}}})

	first := &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
	ops, _ := opsOf(t, first, fsm, st, t0)
	if stops := opsNamed(ops, nomad.OpStop); len(stops) != 1 || stops[0] != "default/victim" {
		t.Fatalf("first leader's ops %+v, want default/victim stopped", ops)
	}
	held := fsm.Read().HeldVictims()
	if len(held) != 1 || held[0].JobID != "default/victim" || held[0].For != "default/pending" || !held[0].Since.Equal(t0) {
		t.Fatalf("held victims recorded %+v, want default/victim held for default/pending since %s", held, t0)
	}
	landed(st, ops, t0.Add(time.Second))
	if got := st.Jobs[victim.Key].Priority; got >= st.Jobs[pending.Key].Priority {
		t.Fatalf("the victim written at %d, not below the job it made room for (%d)", got, st.Jobs[pending.Key].Priority)
	}
	low := st.Jobs[victim.Key].Priority

	// The leader changes (or the server restarts from its snapshot) while
	// the victim's replacement runs on the GPUs.
	fsm = restarted(t, fsm)
	second := &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
	at := t0.Add(2 * time.Second)
	ops, _ = opsOf(t, second, fsm, st, at)
	for _, o := range ops {
		if o.Kind == nomad.OpSetPriority && o.Job == victim.Key && o.Priority > low {
			t.Fatalf("the new leader raised the held victim's replacement from %d to %d (ops %+v)", low, o.Priority, ops)
		}
	}
	if ev := opsNamed(ops, nomad.OpEvaluate); len(ev) != 1 || ev[0] != "default/pending" {
		t.Fatalf("the new leader's ops %+v, want default/pending evaluated (Nomad preempts the replacement for it)", ops)
	}
	if h := fsm.Read().HeldVictims(); len(h) != 1 || !h[0].Since.Equal(t0) {
		t.Fatalf("held victims after the change %+v, want the first leader's", h)
	}
	if q := fsm.Read().QueueEntry("default/victim"); q == nil || !strings.Contains(q.Explanation, "stopped for default/pending at 2026-06-01T10:00:00Z: held") {
		t.Fatalf("the victim's explanation after the change %+v, want it held for default/pending since the first leader stopped it", q)
	}

	// The job it was held for places: the hold ends, and is cleared.
	delete(st.Allocs, "v1-r")
	p := runningAlloc("p1", "pending", 8, at.Add(time.Second))
	st.Allocs[p.ID] = p
	opsOf(t, second, fsm, st, at.Add(2*time.Second))
	if h := fsm.Read().HeldVictims(); len(h) != 0 {
		t.Fatalf("held victims after the job placed %+v, want none", h)
	}
}

// heldVictimRows records the held victims only when they change: nil while
// they are the stored ones (whatever the order, a victim listed twice held
// below the first job), an empty list when none is left.
func TestHeldVictimRows(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	fsm := budgetsFSM(t, []budgets.Spec{{Path: "lab"}, {Path: "lab/a", Share: 1}})
	a := policy.Victim{Job: "default/a", For: "default/p", Since: t0}
	b := policy.Victim{Job: "default/b", For: "default/p", Since: t0.Add(time.Minute)}
	applyEntry(t, fsm, state.PassType, state.PassRequest{At: t0, ReplaceHeldVictims: true,
		HeldVictims: []state.HeldVictim{state.HeldVictimRow(&a), state.HeldVictimRow(&b)}})
	again := a
	again.For, again.Since = "default/q", t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		held []policy.Victim
		want []state.HeldVictim // nil: keep the stored ones
	}{
		{"the stored ones", []policy.Victim{b, a}, nil},
		{"a victim listed twice", []policy.Victim{a, b, again}, nil},
		{"one released", []policy.Victim{b}, []state.HeldVictim{state.HeldVictimRow(&b)}},
		{"one held longer", []policy.Victim{again, b}, []state.HeldVictim{state.HeldVictimRow(&again), state.HeldVictimRow(&b)}},
		{"none left", nil, []state.HeldVictim{}},
	} {
		got := heldVictimRows(rowsInput{view: fsm.Read(), held: tc.held})
		if (got == nil) != (tc.want == nil) || !sameRow(got, tc.want) {
			t.Errorf("%s: rows %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// A held victim whose replacement Nomad placed on another node, and which
// outlasted the waiting job's evaluation, is kept: raised to the protected
// band in its new window, and recorded so, so that a new leader neither
// lowers it again (Nomad would preempt a job that has just started for
// any pending job a gap above it) nor evaluates the waiting job for it.
func TestKeptVictimSurvivesLeaderChange(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	fsm := servedFSM(t, t0)
	victim := gpuJob("default", "victim", "default", 1, 2, map[string]string{"budget": "lab/a", "min_runtime": "10m"})
	pending := gpuJob("default", "pending", "default", 1, 8, map[string]string{"budget": "lab/b", "min_runtime": "30m"})
	other := gpuJob("default", "other", "default", 1, 6, map[string]string{"budget": "lab/b", "min_runtime": "1h"})
	gpus := []nomad.GPUModel{{Model: "H100", Total: 8, Healthy: 8}}
	st := stateOf([]nomad.Job{victim, pending, other},
		[]nomad.Alloc{runningAlloc("v1", "victim", 2, t0.Add(-time.Hour)), runningAlloc("o1", "other", 6, t0.Add(-time.Minute))},
		[]nomad.Node{{ID: "n1", Pool: "default", Status: "ready", Eligible: true, GPUs: gpus},
			{ID: "n2", Pool: "default", Status: "ready", Eligible: true, GPUs: gpus}})
	o1 := st.Allocs["o1"]
	o1.NodeID = "n2"
	st.Allocs["o1"] = o1
	v1 := st.Allocs["v1"]
	v1.NodeID = "n1"
	st.Allocs["v1"] = v1

	r := &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
	ops, _ := opsOf(t, r, fsm, st, t0)
	if stops := opsNamed(ops, nomad.OpStop); len(stops) != 1 || stops[0] != "default/victim" {
		t.Fatalf("ops %+v, want default/victim stopped", ops)
	}
	landed(st, ops, t0.Add(time.Second))
	// Its replacement runs on n2's 2 free GPUs, not on those its stop freed.
	rep := st.Allocs["v1-r"]
	rep.NodeID = "n2"
	st.Allocs["v1-r"] = rep
	low := st.Jobs[victim.Key].Priority

	ops, _ = opsOf(t, r, fsm, st, t0.Add(2*time.Second))
	if ev := opsNamed(ops, nomad.OpEvaluate); len(ev) != 1 || ev[0] != "default/pending" {
		t.Fatalf("ops %+v, want default/pending evaluated (Nomad preempts the replacement if it needs its GPUs)", ops)
	}
	if h := fsm.Read().HeldVictims(); len(h) != 1 || !h[0].Replaced.Equal(t0.Add(2*time.Second)) || h[0].Kept {
		t.Fatalf("held victims %+v, want default/victim held, its job evaluated with it live at +2s", h)
	}
	landed(st, ops, t0.Add(time.Minute))

	// The leader changes; the replacement outlasted the evaluation.
	fsm = restarted(t, fsm)
	r = &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
	ops, _ = opsOf(t, r, fsm, st, t0.Add(40*time.Second))
	raised := false
	for _, o := range ops {
		if o.Kind == nomad.OpSetPriority && o.Job == victim.Key {
			raised = o.Priority == policy.DefaultConfig().Protected
		}
	}
	if !raised || len(opsNamed(ops, nomad.OpEvaluate)) != 0 {
		t.Fatalf("ops %+v, want default/victim raised from %d to the protected band, and no evaluation", ops, low)
	}
	if h := fsm.Read().HeldVictims(); len(h) != 1 || !h[0].Kept {
		t.Fatalf("held victims %+v, want default/victim kept", h)
	}
	landed(st, ops, t0.Add(time.Minute))

	// Another leader change: the kept victim stays protected.
	fsm = restarted(t, fsm)
	r = &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
	ops, _ = opsOf(t, r, fsm, st, t0.Add(time.Minute))
	for _, o := range ops {
		if o.Job == victim.Key || o.Kind == nomad.OpEvaluate {
			t.Fatalf("ops %+v: the kept victim was written or its job evaluated again", ops)
		}
	}
}
