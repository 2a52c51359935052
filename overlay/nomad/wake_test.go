package nomad

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// A change of the view wakes the leader loop (Adapter.Run's changed, which
// the reconciler's Wake is: a channel of one), also when it comes while the
// loop is busy with a pass and reads no wake: it waits, coalesced, for the
// loop to come back; and a change after the loop read a wake wakes it
// again.
func TestViewChangeWakes(t *testing.T) {
	cl, err := api.NewClient(&api.Config{Address: "http://127.0.0.1:1"}) // no Nomad: the watcher retries
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewAdapter(cl, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wakeCh := make(chan struct{}, 1)
	poke := func() {
		select {
		case wakeCh <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, poke); close(done) }()
	defer func() { cancel(); <-done }()
	wake := func(what string) {
		t.Helper()
		select {
		case <-wakeCh:
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake after %s", what)
		}
	}
	k := JobKey{"default", "j"}
	r.View.apply(&change{putJobs: []*Job{{Key: k, ModifyIndex: 1}}, index: 1})
	wake("a job registered")
	// A pass is running: two changes land, nobody reads Wake meanwhile.
	r.View.apply(&change{putJobs: []*Job{{Key: k, ModifyIndex: 2}}, index: 2})
	r.View.apply(&change{putAllocs: []*Alloc{{ID: "a", Job: k, ModifyIndex: 3}}, index: 3})
	wake("changes during a pass")
	for len(r.View.Changed()) > 0 || len(wakeCh) > 0 { // the loop takes what is left as one more pass
		select {
		case <-wakeCh:
		case <-time.After(10 * time.Millisecond):
		}
	}
	r.View.apply(&change{putAllocs: []*Alloc{{ID: "a", Job: k, ModifyIndex: 4, ClientStatus: "running"}}, index: 4})
	wake("a change after the loop read the last wake")
}
