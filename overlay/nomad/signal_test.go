package nomad

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// signalNomad records the allocation signal requests it gets.
type signalNomad struct {
	mu   sync.Mutex
	got  []string // alloc: signal, task
	gone map[string]bool
}

func (f *signalNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var req api.AllocSignalRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	const prefix = "/v1/client/allocation/"
	if r.Method != http.MethodPut && r.Method != http.MethodPost || len(r.URL.Path) <= len(prefix) || r.URL.Path[:len(prefix)] != prefix {
		http.NotFound(w, r)
		return
	}
	id := r.URL.Path[len(prefix) : len(r.URL.Path)-len("/signal")]
	if f.gone[id] {
		http.Error(w, "unknown allocation", http.StatusNotFound)
		return
	}
	f.got = append(f.got, id+": "+req.Signal+", task "+req.Task)
	_ = json.NewEncoder(w).Encode(map[string]any{})
}

// The signal op sends the job's signal to every task (no task named) of
// each allocation; one already gone is no error.
func TestApplySignal(t *testing.T) {
	fake := &signalNomad{gone: map[string]bool{"a2": true}}
	a := fakeApplier(t, fake, ApplyConfig{})
	key := JobKey{Namespace: "default", ID: "train"}
	out := a.Apply(context.Background(), []Op{{Kind: OpSignal, Job: key, Allocs: []string{"a1", "a2", "a3"}, Signal: "SIGUSR1"}})
	if len(out) != 1 || out[0].Err != nil {
		t.Fatalf("outcomes %+v, want one without error", out)
	}
	want := []string{"a1: SIGUSR1, task ", "a3: SIGUSR1, task "}
	if !slices.Equal(fake.got, want) {
		t.Fatalf("Nomad got %q, want %q", fake.got, want)
	}
}
