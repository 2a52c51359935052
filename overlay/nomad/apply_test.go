package nomad

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cl, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	a := NewApplier(cl, ApplyConfig{}, nil)
	key := JobKey{Namespace: "default", ID: "victim"}
	out := a.Apply(context.Background(), []Op{
		{Kind: OpSetPriority, Job: key, Priority: 79, ModifyIndex: 7},
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
