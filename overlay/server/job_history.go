package server

import (
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/state"
)

// stopKinds maps the decision kind of an allot stop to its JobEvent kind.
var stopKinds = map[string]string{
	"preempt": client.StopTimeSlicing,
	"drain":   client.StopDrain,
	"reserve": client.StopReservation,
	"release": client.StopRelease,
}

// forJobRe finds the job a stop made room for in the policy's reason text
// (policy.ReasonVictim and ReasonReservationStop; a test renders both with
// the policy's own Reason.String, so a change of wording fails it).
var forJobRe = regexp.MustCompile(`(?:so that (\S+), from a less served budget|is reserved for (\S+): stopped)`)

// withStandings copies into each stop decision (time slicing, reservation)
// the fair-share standings of the stopped job and of the job it made room
// for, from the pass's queue (the stored one when the pass kept it), so the
// job's history can show the figures that justified the stop as they were.
// The leader calls it before Apply: every server stores the same entry.
func withStandings(ds []state.Decision, queue []state.QueueEntry, v *state.View) []state.Decision {
	row := func(id string) *state.QueueEntry {
		for i := range queue {
			if queue[i].JobID == id {
				return &queue[i]
			}
		}
		if queue == nil {
			return v.QueueEntry(id)
		}
		return nil
	}
	var out []state.Decision
	for i, d := range ds {
		if _, isStop := stopKinds[d.Kind]; !isStop || d.JobID == "" || d.Standings != nil {
			continue
		}
		ids := []string{d.JobID}
		if m := forJobRe.FindStringSubmatch(d.Reason); m != nil {
			ids = append(ids, m[1]+m[2])
		}
		var sts []state.DecisionStanding
		for _, id := range ids {
			if q := row(id); q != nil && q.Standing != nil {
				sts = append(sts, state.DecisionStanding{JobID: id, Leaf: q.Leaf, Standing: q.Standing})
			}
		}
		if sts == nil {
			continue
		}
		if out == nil {
			out = append([]state.Decision(nil), ds...) // the caller's slice stays as it was
		}
		out[i].Standings = sts
	}
	if out == nil {
		return ds
	}
	return out
}

// lookupJob finds a managed job by ID, taking a bare name as the default
// namespace's, as `allot explain` does.
func lookupJob(v *state.View, id string) (*state.Job, error) {
	if j := v.Job(id); j != nil {
		return j, nil
	}
	if !strings.Contains(id, "/") {
		if j := v.Job("default/" + id); j != nil {
			return j, nil
		}
	}
	return nil, errorf(http.StatusNotFound, "job %q is not managed by allot: it is unknown, finished and forgotten, in another namespace, or asks for no GPUs (IDs are namespace/name)", id)
}

// getJobHistory answers GET /v1/jobs/<id>/history: submission, each
// placement with its protected window, each stop with its kind and the
// decision behind it, requeues and charged GPU time, oldest first.
//
// The route is /v1/jobs/{id...} because a job ID holds a slash
// (namespace/name) that clients may send escaped or not.
func (s *Server) getJobHistory(r *http.Request, v *state.View) (any, error) {
	id, ok := strings.CutSuffix(r.PathValue("id"), "/history")
	if !ok || id == "" {
		return nil, errorf(http.StatusNotFound, "no endpoint GET %s; a job's history is /v1/jobs/<namespace/name>/history", r.URL.Path)
	}
	j, err := lookupJob(v, id)
	if err != nil {
		return nil, err
	}
	out := client.JobHistory{JobID: j.ID, Budget: j.Contract.Budget, MinRuntime: j.Contract.MinRuntime,
		Resumable: j.Contract.Resumable, GPUs: j.GPUs, Unallocated: j.Contract.Reason, SubmittedAt: j.SubmittedAt,
		Events: []client.JobEvent{{At: j.SubmittedAt, Kind: client.EventSubmitted, GPUs: j.GPUs, Reason: submitReason(j)}}}
	if q := v.QueueEntry(j.ID); q != nil {
		qj := queueJob(q)
		out.Queue = &qj
		out.BudgetStandingNow = qj.Standing
	}
	stopOf := map[string]*state.Decision{}
	for _, d := range v.Decisions(0) {
		if d.JobID != j.ID {
			continue
		}
		if _, isStop := stopKinds[d.Kind]; isStop && d.AllocID != "" {
			stopOf[d.AllocID] = d
			continue
		}
		out.Events = append(out.Events, client.JobEvent{At: d.At, Kind: client.EventDecision, DecisionKind: d.Kind,
			AllocID: d.AllocID, NodeID: d.NodeID, Reason: d.Reason})
	}
	allocs := v.JobAllocs(j.ID)
	sort.SliceStable(allocs, func(a, b int) bool { return allocs[a].StartedAt.Before(allocs[b].StartedAt) })
	var stops []client.JobEvent
	var charged int64
	for _, a := range allocs {
		charged += a.ChargedGPUSeconds
		placed := client.JobEvent{At: a.StartedAt, Kind: client.EventPlaced, AllocID: a.ID, NodeID: a.NodeID,
			GPUs: a.GPUs, Until: a.ProtectedUntil}
		for _, st := range stops {
			if st.StopKind != client.StopEnded && !st.At.After(a.StartedAt) {
				placed.Kind = client.EventRequeued
				placed.Reason = "placed again after " + st.StopKind + " of " + st.AllocID
				out.Requeues++
				break
			}
		}
		out.Placements++
		out.Events = append(out.Events, placed)
		if !a.ProtectedUntil.IsZero() && a.ProtectedUntil.After(a.StartedAt) &&
			(a.Running() || a.ProtectedUntil.Before(a.StoppedAt)) {
			out.Events = append(out.Events, client.JobEvent{At: a.ProtectedUntil, Kind: client.EventProtected,
				AllocID: a.ID, NodeID: a.NodeID, Reason: "protected window ends: preemptible from here"})
		}
		if a.Running() {
			continue
		}
		st := stopEvent(v, a, stopOf[a.ID])
		stops = append(stops, st)
		out.Events = append(out.Events, st)
	}
	out.ChargedGPUHours = round3(float64(charged) / 3600)
	// Nomad's submit time is its latest version's: allot's priority writes
	// and a user's re-run register new versions, so it may come after the
	// first placement.
	if len(allocs) > 0 && allocs[0].StartedAt.Before(j.SubmittedAt) {
		out.Events[0].Reason = "latest job version registered (allot's priority writes and re-runs register versions); " + out.Events[0].Reason
	}
	rank := map[string]int{client.EventSubmitted: 0, client.EventStopped: 1, client.EventRequeued: 2,
		client.EventPlaced: 2, client.EventProtected: 3, client.EventDecision: 4}
	sort.SliceStable(out.Events, func(a, b int) bool {
		ea, eb := out.Events[a], out.Events[b]
		if !ea.At.Equal(eb.At) {
			return ea.At.Before(eb.At)
		}
		return rank[ea.Kind] < rank[eb.Kind]
	})
	return out, nil
}

// stopEvent says how allocation a stopped: by allot's decision d (time
// slicing, drain, reservation), by Nomad's preemption, or otherwise.
func stopEvent(v *state.View, a *state.Alloc, d *state.Decision) client.JobEvent {
	ev := client.JobEvent{At: a.StoppedAt, Kind: client.EventStopped, AllocID: a.ID, NodeID: a.NodeID, GPUs: a.GPUs,
		ChargedGPUH: round3(float64(a.ChargedGPUSeconds) / 3600)}
	switch {
	case d != nil:
		ev.StopKind, ev.DecisionKind, ev.Reason = stopKinds[d.Kind], d.Kind, d.Reason
		if m := forJobRe.FindStringSubmatch(d.Reason); m != nil {
			ev.ForJob = m[1] + m[2]
			if q := v.QueueEntry(ev.ForJob); q != nil {
				ev.ForJobBudget = q.Leaf
				ev.ForJobStanding = queueJob(q).Standing
			} else if fj := v.Job(ev.ForJob); fj != nil {
				ev.ForJobBudget = fj.Contract.Budget
			}
		}
		for _, st := range d.Standings {
			cs := queueJob(&state.QueueEntry{Standing: st.Standing}).Standing
			switch st.JobID {
			case a.JobID:
				ev.StandingAtStop = cs
			case ev.ForJob:
				ev.ForJobStandingAtStop = cs
				if ev.ForJobBudget == "" {
					ev.ForJobBudget = st.Leaf
				}
			}
		}
	case a.Preemptions > 0:
		ev.StopKind, ev.Reason = client.StopNomad, "preempted by Nomad's scheduler for a higher-priority placement (allot stopped nothing here)"
	default:
		ev.StopKind, ev.Reason = client.StopEnded, "the allocation finished, or was stopped outside allot"
	}
	return ev
}

func submitReason(j *state.Job) string {
	if j.Contract.Budget == "" || j.Contract.MinRuntime == 0 {
		if j.Contract.Reason != "" {
			return "unallocated: " + j.Contract.Reason
		}
		return "unallocated: free of charge, preemptible at any moment"
	}
	return "allocated to " + j.Contract.Budget + ", protected for " + j.Contract.MinRuntime.String() + " once running"
}
