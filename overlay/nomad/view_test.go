package nomad

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func TestViewKeepsNewestAndCoalesces(t *testing.T) {
	v := NewView()
	k := JobKey{"default", "j"}
	v.apply(&change{putJobs: []*Job{{Key: k, Priority: 50, ModifyIndex: 10}}, index: 10})
	v.apply(&change{putJobs: []*Job{{Key: k, Priority: 70, ModifyIndex: 12}}, index: 12})
	// A replayed older event must not roll the job back.
	v.apply(&change{putJobs: []*Job{{Key: k, Priority: 50, ModifyIndex: 10}}, index: 10})
	s := v.State()
	if s.Jobs[k].Priority != 70 || s.Index != 12 {
		t.Fatalf("after a replay: priority %d index %d; want 70 at 12", s.Jobs[k].Priority, s.Index)
	}
	// Three changes, one pending notification.
	n := 0
	for {
		select {
		case <-v.Changed():
			n++
			continue
		default:
		}
		break
	}
	if n != 1 {
		t.Fatalf("%d notifications pending, want 1 (coalesced)", n)
	}
	// A no-op change does not notify.
	v.apply(&change{putJobs: []*Job{{Key: k, Priority: 50, ModifyIndex: 3}}})
	select {
	case <-v.Changed():
		t.Fatal("a change that changed nothing notified")
	default:
	}
	// Purging a job drops its allocations and blocked eval.
	v.apply(&change{
		putAllocs:  []*Alloc{{ID: "a", Job: k, ModifyIndex: 13}, {ID: "b", Job: JobKey{"default", "other"}, ModifyIndex: 13}},
		putBlocked: []*BlockedEval{{ID: "e", Job: k, ModifyIndex: 13}},
	})
	v.apply(&change{delJobs: []JobKey{k}})
	s = v.State()
	if _, ok := s.Jobs[k]; ok || len(s.Allocs) != 1 || len(s.Blocked) != 0 {
		t.Fatalf("after purge: jobs %v allocs %v blocked %v; want job, its alloc and eval gone", s.Jobs, s.Allocs, s.Blocked)
	}
}

func TestChangeFromEvents(t *testing.T) {
	// Payloads as Nomad sends them (JSON decoded into maps); allocation
	// events carry no job, so the job source is asked once per job.
	frame := &api.Events{Index: 20, Events: []api.Event{
		{Topic: api.TopicJob, Type: "JobRegistered", Key: "j", Index: 20, Payload: map[string]any{
			"Job": map[string]any{"ID": "j", "Namespace": "default", "Priority": 50, "ModifyIndex": 20, "JobModifyIndex": 20,
				"TaskGroups": []any{map[string]any{"Name": "g", "Count": 2, "Tasks": []any{map[string]any{"Name": "t",
					"Resources": map[string]any{"Devices": []any{map[string]any{"Name": "nvidia/gpu", "Count": 2}}}}}}}},
		}},
		{Topic: api.TopicAllocation, Type: "PlanResult", Key: "a1", Index: 20, Payload: map[string]any{
			"Allocation": map[string]any{"ID": "a1", "JobID": "k", "Namespace": "default", "TaskGroup": "g",
				"DesiredStatus": "run", "ClientStatus": "pending", "ModifyIndex": 20},
		}},
		{Topic: api.TopicAllocation, Type: "PlanResult", Key: "a2", Index: 20, Payload: map[string]any{
			"Allocation": map[string]any{"ID": "a2", "JobID": "k", "Namespace": "default", "TaskGroup": "g",
				"DesiredStatus": "run", "ClientStatus": "pending", "ModifyIndex": 20},
		}},
		{Topic: api.TopicEvaluation, Type: "EvaluationUpdated", Key: "e1", Index: 20, Payload: map[string]any{
			"Evaluation": map[string]any{"ID": "e1", "JobID": "k", "Namespace": "default", "Status": "blocked",
				"ClassEligibility": map[string]any{"v1:123": false}, "ModifyIndex": 20},
		}},
		{Topic: api.TopicNode, Type: "NodeDeregistration", Key: "n9", Index: 20, Payload: map[string]any{"Plugin": map[string]any{"ID": "n9"}}},
	}}
	asked := 0
	src := func(k JobKey) (*Job, error) {
		asked++
		j := Job{Key: k, Groups: []Group{{Name: "g", Count: 2, GPUs: 3}}, ModifyIndex: 5}
		return &j, nil
	}
	c, err := changeFromEvents(frame, src)
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 {
		t.Errorf("job source asked %d times for one job, want 1", asked)
	}
	if len(c.putJobs) != 2 || c.putJobs[0].GPUs() != 4 || c.putJobs[0].Priority != 50 {
		t.Errorf("jobs = %+v, want j (2×2 GPUs, priority 50) and the fetched k", c.putJobs)
	}
	if len(c.putAllocs) != 2 || c.putAllocs[0].GPUs != 3 || c.putAllocs[1].GPUs != 3 {
		t.Errorf("allocs = %+v, want two allocs asking 3 GPUs each from k's group", c.putAllocs)
	}
	if len(c.putBlocked) != 1 || !c.putBlocked[0].ClassIneligible {
		t.Errorf("blocked = %+v, want e1 marked class-ineligible", c.putBlocked)
	}
	if len(c.delNodes) != 1 || c.delNodes[0] != "n9" {
		t.Errorf("deleted nodes = %v, want n9 from the event key", c.delNodes)
	}
}

// evalFrame is one Evaluation event as Nomad sends it.
func evalFrame(index uint64, id, job, status string, extra map[string]any) *api.Events {
	e := map[string]any{"ID": id, "JobID": job, "Namespace": "default", "Status": status,
		"CreateTime": int64(1_900_000_000_000_000_000), "ModifyIndex": index}
	for k, v := range extra {
		e[k] = v
	}
	return &api.Events{Index: index, Events: []api.Event{{Topic: api.TopicEvaluation, Type: "EvaluationUpdated",
		Key: id, Index: index, Payload: map[string]any{"Evaluation": e}}}}
}

// The view knows which jobs Nomad is evaluating: a pending evaluation puts
// the job in State.Evaluating (with the evaluation's creation time) until
// an event shows it finished or blocked; a replay of the pending event, a
// delayed evaluation and a purged job do not count.
func TestViewTracksEvaluationsInFlight(t *testing.T) {
	v := NewView()
	k := JobKey{"default", "j"}
	apply := func(f *api.Events) {
		t.Helper()
		c, err := changeFromEvents(f, func(JobKey) (*Job, error) { return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		v.apply(c)
	}
	evaluating := func() (time.Time, bool) {
		t0, ok := v.State().Evaluating[k]
		return t0, ok
	}
	v.apply(&change{putJobs: []*Job{{Key: k, ModifyIndex: 10}}, index: 10})
	<-v.Changed()

	apply(evalFrame(11, "e1", "j", "pending", nil))
	if at, ok := evaluating(); !ok || !at.Equal(time.Unix(0, 1_900_000_000_000_000_000)) {
		t.Fatalf("after a pending evaluation: evaluating %v since %s; want since its CreateTime", ok, at)
	}
	select {
	case <-v.Changed():
	default:
		t.Fatal("a pending evaluation did not notify")
	}
	apply(evalFrame(12, "e1", "j", "complete", nil))
	if _, ok := evaluating(); ok {
		t.Fatal("a completed evaluation still counts as in flight")
	}
	select {
	case <-v.Changed():
	default:
		t.Fatal("a finished evaluation did not notify")
	}
	apply(evalFrame(11, "e1", "j", "pending", nil)) // a resumed stream replays it
	if _, ok := evaluating(); ok {
		t.Fatal("a replayed pending event brought back a finished evaluation")
	}

	apply(evalFrame(13, "e2", "j", "pending", nil))
	apply(evalFrame(14, "e2", "j", "blocked", nil))
	if _, ok := evaluating(); ok {
		t.Fatal("a blocked evaluation counts as in flight")
	}
	if b, ok := v.State().Blocked[k]; !ok || b.ID != "e2" {
		t.Fatalf("blocked = %+v, want e2", v.State().Blocked)
	}

	apply(evalFrame(15, "e3", "j", "pending", map[string]any{"WaitUntil": "2030-01-01T00:00:00Z"}))
	if _, ok := evaluating(); ok {
		t.Fatal("a delayed evaluation (WaitUntil) counts as in flight")
	}

	apply(evalFrame(16, "e4", "j", "pending", nil))
	v.apply(&change{delJobs: []JobKey{k}})
	if len(v.State().Evaluating) != 0 {
		t.Fatalf("after purging the job: evaluating %v, want none", v.State().Evaluating)
	}

	// A registration counts as an evaluation in flight until an event of
	// an evaluation at or after it shows up: Nomad may send the evaluation
	// in a frame after the job's, with the same index.
	v.replace([]*Job{{Key: k, ModifyIndex: 20}}, nil, nil, nil, nil, 20, 20)
	apply(&api.Events{Index: 21, Events: []api.Event{{Topic: api.TopicJob, Type: "JobRegistered", Key: "j", Index: 21,
		Payload: map[string]any{"Job": map[string]any{"ID": "j", "Namespace": "default", "Priority": 50,
			"ModifyIndex": 21, "JobModifyIndex": 21, "SubmitTime": int64(1_900_000_000_000_000_000)}}}}})
	if at, ok := evaluating(); !ok || !at.Equal(time.Unix(0, 1_900_000_000_000_000_000)) {
		t.Fatalf("after a registration with no evaluation yet: evaluating %v since %s; want since its SubmitTime", ok, at)
	}
	apply(evalFrame(21, "e7", "j", "pending", nil))
	apply(evalFrame(22, "e7", "j", "complete", nil))
	if _, ok := evaluating(); ok {
		t.Fatal("a registration whose evaluation completed still counts as in flight")
	}

	// A rebuild from the lists keeps what they show pending, and an event
	// older than the list of evaluations does not add one it did not show.
	v.replace([]*Job{{Key: k, ModifyIndex: 20}}, nil, nil, nil,
		[]*pendingEval{{ID: "e5", Job: k, Created: time.Unix(100, 0)}}, 30, 20)
	apply(evalFrame(25, "e6", "j", "pending", nil))
	if at, ok := evaluating(); !ok || !at.Equal(time.Unix(100, 0)) || len(v.pending) != 1 {
		t.Fatalf("after a rebuild and an older event: evaluating %v since %s (%d pending); want e5 alone", ok, at, len(v.pending))
	}
}
