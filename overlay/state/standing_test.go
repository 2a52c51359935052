package state

import (
	"math"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// A plan record written before queue rows had a standing still applies
// (no standing, zero times), and a new one keeps an infinite level fairshare.
func TestPlanRecordStandingCompatible(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	old := `{"At":"2026-03-02T09:00:00Z","Queue":[{"JobID":"default/a","Leaf":"ai2/prior","Band":"pending",` +
		`"Priority":80,"SortMetric":"inf","Position":1,"Explanation":"pending","PlannedAt":"2026-03-02T09:00:00Z"}]}`
	if res := f.ApplyEntry(append([]byte{byte(PlanRecordType)}, old...)); res != nil {
		if err, ok := res.(error); ok {
			t.Fatalf("old plan record: %v", err)
		}
	}
	q := f.Read().QueueEntry("default/a")
	if q == nil || q.Standing != nil || !q.FreeAt.IsZero() || !q.ProtectedUntil.IsZero() || !math.IsInf(float64(q.SortMetric), 1) {
		t.Fatalf("old entry read as %+v", q)
	}

	mustApply(t, f, PlanRecordType, PlanRecordRequest{At: t0, Queue: []QueueEntry{{JobID: "default/a", Leaf: "ai2/prior",
		FreeAt: t0.Add(time.Hour), Standing: &Standing{Metric: 1, LeafPosition: 1, Parts: []StandingPart{
			{Path: "ai2/prior", Share: 0.75, UsageFraction: 0, Level: budgets.Ratio(math.Inf(1))}}}}}})
	q = f.Read().QueueEntry("default/a")
	if q == nil || q.Standing == nil || len(q.Standing.Parts) != 1 || !math.IsInf(float64(q.Standing.Parts[0].Level), 1) ||
		q.Standing.Parts[0].Share != 0.75 || !q.FreeAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("new entry read as %+v", q)
	}
}
