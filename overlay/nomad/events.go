package nomad

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// The event stream topics the watcher subscribes to (docs/nomad-facts.md f).
var watchTopics = map[api.Topic][]string{
	api.TopicJob:        {"*"},
	api.TopicAllocation: {"*"},
	api.TopicNode:       {"*"},
	api.TopicEvaluation: {"*"},
}

// jobSource gives the job an allocation belongs to: the job cache first, then
// Nomad (allocation events and list stubs carry no job).
type jobSource func(JobKey) (*Job, error)

// changeFromEvents turns one frame of the event stream into a view change.
func changeFromEvents(evs *api.Events, jobs jobSource) (*change, error) {
	c := &change{index: evs.Index}
	fetched := map[JobKey]*Job{}
	for i := range evs.Events {
		ev := &evs.Events[i]
		var err error
		switch ev.Topic {
		case api.TopicJob:
			err = jobEvent(c, ev)
		case api.TopicAllocation:
			err = allocEvent(c, ev, jobs, fetched)
		case api.TopicNode:
			err = nodeEvent(c, ev)
		case api.TopicEvaluation:
			err = evalEvent(c, ev)
		}
		if err != nil {
			return nil, fmt.Errorf("event %s/%s %q at index %d: %w", ev.Topic, ev.Type, ev.Key, ev.Index, err)
		}
	}
	return c, nil
}

// payloadObject decodes the object under key of an event's payload into out
// the way the HTTP API decodes the same object (encoding/json), and reports
// whether the payload held one. The api package's own accessors (Event.Node
// and the like) decode with mapstructure, which does not descend into
// embedded structs: DrainStrategy's embedded DrainSpec (Deadline,
// IgnoreSystemJobs) came out zero, so a drain with a deadline read as a drain
// without one. Decoding as JSON gives the view from events exactly what
// GET /v1/node/<id> gives the view from the list endpoints.
func payloadObject(ev *api.Event, key string, out any) (bool, error) {
	v, ok := ev.Payload[key]
	if !ok || v == nil {
		return false, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return false, fmt.Errorf("payload %s: %w", key, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return false, fmt.Errorf("payload %s: %w", key, err)
	}
	return true, nil
}

func jobEvent(c *change, ev *api.Event) error {
	var j api.Job
	ok, err := payloadObject(ev, "Job", &j)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no job in payload")
	}
	if deleted, _ := ev.Payload["Deleted"].(bool); deleted {
		c.delJobs = append(c.delJobs, JobKey{Namespace: derefOr(j.Namespace, "default"), ID: deref(j.ID)})
		return nil
	}
	job := jobFromAPI(&j)
	c.putJobs = append(c.putJobs, &job)
	// Nomad evaluates a registration in the same raft entry, except for a
	// periodic or parameterized job's parent, which never places anything.
	if ev.Type == "JobRegistered" && !job.Stop && !j.IsPeriodic() && !j.IsParameterized() {
		c.registered = append(c.registered, &pendingEval{Job: job.Key, Created: job.SubmitTime, ModifyIndex: job.JobModifyIndex})
	}
	return nil
}

func allocEvent(c *change, ev *api.Event, jobs jobSource, fetched map[JobKey]*Job) error {
	a := &api.Allocation{}
	ok, err := payloadObject(ev, "Allocation", a)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no allocation in payload")
	}
	key := JobKey{Namespace: orDefault(a.Namespace), ID: a.JobID}
	var job *Job
	if a.Job != nil {
		j := jobFromAPI(a.Job)
		job = &j
	} else if j, ok := fetched[key]; ok {
		job = j
	} else {
		if job, err = jobs(key); err != nil {
			return fmt.Errorf("job %s of allocation %s: %w", key, a.ID, err)
		}
		fetched[key] = job
		if job != nil {
			c.putJobs = append(c.putJobs, job)
		}
	}
	alloc := allocFromAPI(a, job)
	c.putAllocs = append(c.putAllocs, &alloc)
	return nil
}

func nodeEvent(c *change, ev *api.Event) error {
	if ev.Type == "NodeDeregistration" {
		// Nomad sends a deleted node under the payload key "Plugin"
		// (state/events.go reuses CSIPluginEvent): the event key is its ID.
		c.delNodes = append(c.delNodes, ev.Key)
		return nil
	}
	var n api.Node
	ok, err := payloadObject(ev, "Node", &n)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no node in payload")
	}
	node := nodeFromAPI(&n)
	c.putNodes = append(c.putNodes, &node)
	return nil
}

func evalEvent(c *change, ev *api.Event) error {
	e := &api.Evaluation{}
	ok, err := payloadObject(ev, "Evaluation", e)
	if err != nil {
		return err
	}
	if !ok || e.JobID == "" {
		return nil // node evals carry no job
	}
	key := JobKey{Namespace: orDefault(e.Namespace), ID: e.JobID}
	switch {
	case e.Status == "blocked":
		b := blockedFromEval(e)
		c.putBlocked = append(c.putBlocked, &b)
		return nil
	case inFlight(e):
		c.putPending = append(c.putPending, pendingFromEval(e))
	}
	c.unblockEvals = append(c.unblockEvals, evalDone{Job: key, ID: e.ID, ModifyIndex: e.ModifyIndex, InFlight: inFlight(e)})
	return nil
}

// inFlight reports whether an evaluation is queued or being scheduled now:
// pending and not delayed (a reschedule's follow-up waits until WaitUntil,
// and what it will place is not under way yet).
func inFlight(e *api.Evaluation) bool {
	return e.Status == api.EvalStatusPending && e.WaitUntil.IsZero()
}

func pendingFromEval(e *api.Evaluation) *pendingEval {
	return &pendingEval{ID: e.ID, Job: JobKey{Namespace: orDefault(e.Namespace), ID: e.JobID},
		Created: unixNanos(e.CreateTime), ModifyIndex: e.ModifyIndex}
}

// blockedFromEval keeps what explanations and recovery need of a blocked eval.
func blockedFromEval(e *api.Evaluation) BlockedEval {
	b := BlockedEval{
		ID: e.ID, Job: JobKey{Namespace: orDefault(e.Namespace), ID: e.JobID},
		ModifyIndex: e.ModifyIndex, Reason: failureReason(e.FailedTGAllocs),
	}
	for _, ok := range e.ClassEligibility {
		if !ok {
			b.ClassIneligible = true
		}
	}
	return b
}

// failureReason summarizes placement failures the way `nomad job status`
// words them, sorted so the text is stable.
func failureReason(failed map[string]*api.AllocationMetric) string {
	var parts []string
	for tg, m := range failed {
		if m == nil {
			continue
		}
		for dim := range m.DimensionExhausted {
			parts = append(parts, fmt.Sprintf("group %q: Dimension %q exhausted", tg, dim))
		}
		for cls := range m.ConstraintFiltered {
			parts = append(parts, fmt.Sprintf("group %q: Constraint %q filtered nodes", tg, cls))
		}
		if m.NodesEvaluated == 0 && m.NodesAvailable != nil && len(m.DimensionExhausted) == 0 {
			parts = append(parts, fmt.Sprintf("group %q: no nodes were eligible for evaluation", tg))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
