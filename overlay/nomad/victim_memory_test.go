package nomad

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// The memory passed back keeps what Nomad accepted: held victims whose stop
// went through, this plan's stops and evaluations that went through, and
// what earlier plans issued; a failed or skipped op leaves nothing behind.
func TestAppliedMemory(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	before := now.Add(-10 * time.Second)
	plan := &policy.Plan{Now: now,
		Victims: []policy.Victim{
			{Job: "default/v1", For: "default/b1", Since: now},
			{Job: "default/v2", For: "default/b2", Since: now},
			{Job: "default/v0", For: "default/b0", Since: before},
		},
		Issued: []policy.Issued{
			{Kind: policy.IssuedStop, Job: "default/v0", Allocs: []string{"a0"}, At: before},
			{Kind: policy.IssuedStop, Job: "default/v1", Allocs: []string{"a1"}, At: now},
			{Kind: policy.IssuedStop, Job: "default/v2", Allocs: []string{"a2"}, At: now},
			{Kind: policy.IssuedEvaluate, Job: "default/b1", At: now},
			{Kind: policy.IssuedEvaluate, Job: "default/b2", At: now},
		},
	}
	results := []Outcome{
		{Op: Op{Kind: OpStop, Job: JobKey{Namespace: "default", ID: "v1"}, Allocs: []string{"a1"}}},
		{Op: Op{Kind: OpStop, Job: JobKey{Namespace: "default", ID: "v2"}, Allocs: []string{"a2"}}, Err: ErrSkipped},
		{Op: Op{Kind: OpEvaluate, Job: JobKey{Namespace: "default", ID: "b1"}}},
		{Op: Op{Kind: OpEvaluate, Job: JobKey{Namespace: "default", ID: "b2"}}, Err: errors.New("500")},
	}
	victims, issued := appliedMemory(plan, results)
	var gotV []string
	for _, v := range victims {
		gotV = append(gotV, v.Job)
	}
	if want := []string{"default/v1", "default/v0"}; !slices.Equal(gotV, want) {
		t.Errorf("victims %v, want %v", gotV, want)
	}
	var gotI []string
	for _, is := range issued {
		gotI = append(gotI, is.Kind.String()+" "+is.Job)
	}
	if want := []string{"stop default/v0", "stop default/v1", "evaluate default/b1"}; !slices.Equal(gotI, want) {
		t.Errorf("issued %v, want %v", gotI, want)
	}
}
