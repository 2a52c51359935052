package nomad

import (
	"context"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
	"github.com/hashicorp/nomad/api"
)

// A change of the view wakes the leader loop (Reconciler.Wake), also when
// it comes while the loop is busy with a pass and reads no wake: it waits,
// coalesced, for the loop to come back; and a change after the loop read
// a wake wakes it again.
func TestViewChangeWakes(t *testing.T) {
	cl, err := api.NewClient(&api.Config{Address: "http://127.0.0.1:1"}) // no Nomad: the watcher retries
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReconciler(ReconcilerConfig{Client: cl, Policy: policy.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	wake := func(what string) {
		t.Helper()
		select {
		case <-r.Wake():
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake after %s", what)
		}
	}
	k := JobKey{"default", "j"}
	r.View().apply(&change{putJobs: []*Job{{Key: k, ModifyIndex: 1}}, index: 1})
	wake("a job registered")
	// A pass is running: two changes land, nobody reads Wake meanwhile.
	r.View().apply(&change{putJobs: []*Job{{Key: k, ModifyIndex: 2}}, index: 2})
	r.View().apply(&change{putAllocs: []*Alloc{{ID: "a", Job: k, ModifyIndex: 3}}, index: 3})
	wake("changes during a pass")
	for len(r.View().Changed()) > 0 || len(r.Wake()) > 0 { // the loop takes what is left as one more pass
		select {
		case <-r.Wake():
		case <-time.After(10 * time.Millisecond):
		}
	}
	r.View().apply(&change{putAllocs: []*Alloc{{ID: "a", Job: k, ModifyIndex: 4, ClientStatus: "running"}}, index: 4})
	wake("a change after the loop read the last wake")
}
