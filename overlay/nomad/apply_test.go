package nomad

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// evalNomad is a fake Nomad for a victim's lower-then-stop: the
// re-registration's evaluation stays pending for the first evalReads reads.
type evalNomad struct {
	mu        sync.Mutex
	evalReads int
	log       []string
}

func (f *evalNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/job/victim":
		reply(map[string]any{"ID": "victim", "Namespace": "default", "Priority": 90, "JobModifyIndex": 7, "Version": 0})
	case strings.HasSuffix(r.URL.Path, "/submission"):
		http.Error(w, "job source not found", http.StatusNotFound)
	case r.URL.Path == "/v1/job/victim/plan":
		reply(map[string]any{"Annotations": map[string]any{"DesiredTGUpdates": map[string]any{"g": map[string]any{"InPlaceUpdate": 1}}}})
	case r.URL.Path == "/v1/jobs" && r.Method != http.MethodGet:
		f.log = append(f.log, "register")
		reply(map[string]any{"EvalID": "ev-1", "JobModifyIndex": 8})
	case r.URL.Path == "/v1/evaluation/ev-1":
		status := "complete"
		if f.evalReads > 0 {
			f.evalReads--
			status = "pending"
		}
		f.log = append(f.log, "eval "+status)
		w.Header().Set("X-Nomad-Index", "9")
		reply(map[string]any{"ID": "ev-1", "Status": status})
	case strings.HasPrefix(r.URL.Path, "/v1/allocation/") && strings.HasSuffix(r.URL.Path, "/stop"):
		f.log = append(f.log, "stop")
		reply(map[string]any{"EvalID": "ev-2"})
	default:
		http.NotFound(w, r)
	}
}

// A victim is stopped only once the evaluation of its re-registration is no
// longer pending: Nomad loses a stop that lands while that evaluation's
// in-place update is in flight.
func TestApplyStopWaitsForRegistrationEval(t *testing.T) {
	fake := &evalNomad{evalReads: 2}
	a := fakeApplier(t, fake, ApplyConfig{})
	key := JobKey{Namespace: "default", ID: "victim"}
	out := a.Apply(context.Background(), []Op{
		{Kind: OpSetPriority, Job: key, Priority: 79, ModifyIndex: 7, Placed: true},
		{Kind: OpStop, Job: key, Allocs: []string{"a1"}},
	})
	for _, o := range out {
		if o.Err != nil {
			t.Fatalf("%s: %v", o.Op.Kind, o.Err)
		}
	}
	want := "register, eval pending, eval pending, eval complete, stop"
	if got := strings.Join(fake.log, ", "); got != want {
		t.Fatalf("Nomad saw %q, want %q", got, want)
	}
	// A stop without a re-registration in the batch does not wait.
	fake.log = nil
	a.Apply(context.Background(), []Op{{Kind: OpStop, Job: key, Allocs: []string{"a1"}}})
	if got := strings.Join(fake.log, ", "); got != "stop" {
		t.Fatalf("Nomad saw %q, want only the stop", got)
	}
}

// slowNomad answers every request after a pause and records how many
// registrations were in flight at once and the order of what it saw.
type slowNomad struct {
	mu             sync.Mutex
	inFlight, most int
	log            []string
	// seq has "begin J" when a registration of job J arrives and "end J"
	// when it is answered.
	seq []string
}

func (f *slowNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	job := strings.TrimPrefix(r.URL.Path, "/v1/job/")
	switch {
	case r.Method == http.MethodGet && !strings.Contains(job, "/"):
		reply(map[string]any{"ID": job, "Namespace": "default", "Priority": 50, "JobModifyIndex": 7})
	case r.URL.Path == "/v1/jobs" && r.Method != http.MethodGet:
		var req struct{ Job struct{ ID string } }
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.inFlight++
		f.most = max(f.most, f.inFlight)
		f.seq = append(f.seq, "begin "+req.Job.ID)
		f.mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		f.mu.Lock()
		f.inFlight--
		f.log = append(f.log, "register "+req.Job.ID)
		f.seq = append(f.seq, "end "+req.Job.ID)
		f.mu.Unlock()
		reply(map[string]any{"JobModifyIndex": 8})
	case strings.HasSuffix(r.URL.Path, "/evaluate"):
		f.mu.Lock()
		f.log = append(f.log, "evaluate "+strings.TrimSuffix(job, "/evaluate"))
		f.mu.Unlock()
		reply(map[string]any{"EvalID": "e"})
	default:
		http.NotFound(w, r)
	}
}

// The priority writes of a batch go Parallel at a time, and the step after
// them (evaluations) starts only once every one of them is done.
func TestApplyWritesInParallelStepByStep(t *testing.T) {
	fake := &slowNomad{}
	a := fakeApplier(t, fake, ApplyConfig{Parallel: 4})
	var ops []Op
	for i := 0; i < 12; i++ {
		ops = append(ops, Op{Kind: OpSetPriority, Job: JobKey{"default", fmt.Sprintf("j%02d", i)}, Priority: 89, ModifyIndex: 7})
	}
	ops = append(ops, Op{Kind: OpEvaluate, Job: JobKey{"default", "j00"}})
	out := a.Apply(context.Background(), ops)
	for i, o := range out {
		if o.Err != nil || o.Op.Job != ops[i].Job || o.Op.Kind != ops[i].Kind {
			t.Fatalf("outcome %d = %+v, want op %+v done", i, o, ops[i])
		}
	}
	if fake.most < 2 || fake.most > 4 {
		t.Errorf("%d registrations in flight at once, want 2 to 4 (Parallel 4)", fake.most)
	}
	if n := len(fake.log); n != 13 || fake.log[n-1] != "evaluate j00" {
		t.Errorf("Nomad saw %v, want 12 registrations then the evaluation", fake.log)
	}
}

// Priority writes of one step go Parallel at a time, and a write of the
// next step starts only once every write of the step before is answered:
// a write that makes Nomad place (and maybe preempt) never overtakes one
// that lifts a placed job out of its reach (policy.WriteStep).
func TestApplyWriteStepsInOrder(t *testing.T) {
	fake := &slowNomad{}
	a := fakeApplier(t, fake, ApplyConfig{Parallel: 4})
	var ops []Op
	step := map[string]uint8{}
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("j%02d", i)
		step[id] = uint8(i / 4) // steps 0, 0, 0, 0, 1, 1, 1, 1, 2, 2
		ops = append(ops, Op{Kind: OpSetPriority, Job: JobKey{"default", id}, Priority: 89, ModifyIndex: 7, Step: step[id]})
	}
	for i, o := range a.Apply(context.Background(), ops) {
		if o.Err != nil {
			t.Fatalf("outcome %d = %+v, want done", i, o)
		}
	}
	ended := map[uint8]int{}
	for _, e := range fake.seq {
		what, id, _ := strings.Cut(e, " ")
		if what == "end" {
			ended[step[id]]++
			continue
		}
		for s := uint8(0); s < step[id]; s++ {
			if ended[s] != 4 { // steps 0 and 1 have 4 writes each
				t.Errorf("%s (step %d) began with %d of step %d's 4 writes answered; Nomad saw %v", id, step[id], ended[s], s, fake.seq)
			}
		}
	}
	if fake.most < 2 {
		t.Errorf("%d registrations in flight at once, want 2 to 4 (Parallel 4, 4 writes a step)", fake.most)
	}
}

// fakeApplier is an Applier writing to a fake Nomad served by h, closed
// when the test ends.
func fakeApplier(t *testing.T, h http.Handler, cfg ApplyConfig) *Applier {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cl, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return NewApplier(cl, cfg, nil)
}
