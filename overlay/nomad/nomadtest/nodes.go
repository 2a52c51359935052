package nomadtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Nodes is a fake Nomad serving only GET /v1/node/<id> and
// PUT /v1/node/<id>/eligibility, for tests of eligibility writes; it
// records every write.
type Nodes struct {
	URL string
	mu  sync.Mutex
	elg map[string]string
	wr  []string
}

// NewNodes serves the nodes of elg (node ID -> "eligible" or "ineligible")
// until the test ends.
func NewNodes(t *testing.T, elg map[string]string) *Nodes {
	f := &Nodes{elg: elg}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// Writes lists the eligibility writes so far, as "<node> <eligibility>".
func (f *Nodes) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.wr...)
}

func (f *Nodes) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/node/")
	id, verb, _ := strings.Cut(rest, "/")
	e, known := f.elg[id]
	if !ok || !known {
		http.Error(w, "node not found", http.StatusNotFound)
		return
	}
	switch {
	case r.Method == http.MethodGet && verb == "":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ID":"` + id + `","SchedulingEligibility":"` + e + `"}`))
	case r.Method == http.MethodPut && verb == "eligibility":
		var body struct{ Eligibility string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.elg[id] = body.Eligibility
		f.wr = append(f.wr, id+" "+body.Eligibility)
		_, _ = w.Write([]byte(`{}`))
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusMethodNotAllowed)
	}
}
