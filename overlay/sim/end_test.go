package sim

import (
	"strings"
	"testing"
	"time"
)

// A run ends at the trace's last event unless a horizon is given, and says
// what it left unfinished; a horizon past the last event runs on.
func TestRunEndsAndSaysWhatIsLeft(t *testing.T) {
	tr := func() *Trace {
		return &Trace{Jobs: []JobSpec{
			{ID: "long", Class: ClassTrain, Count: 2, GPUs: 4, Work: 5 * time.Hour},
			{ID: "wait", Submit: time.Hour, Class: ClassTrain, Count: 1, GPUs: 8, Work: time.Hour},
		}}
	}
	c := UniformCluster(1, 8)
	at := DefaultOptions()
	r, err := Run(tr(), c, nil, NewBaseline(DefaultBaselineConfig()), at)
	if err != nil {
		t.Fatal(err)
	}
	// At 1h (the last submission) long has 4h of 8 GPUs left, wait 1h of 8.
	want := EndState{Horizon: "trace end", Running: 1, Pending: 1, UnfinishedGPUHours: 4*8 + 8}
	if r.AtEnd != want || r.Finished != 0 {
		t.Errorf("at the trace's end: %+v, %d finished; want %+v, 0", r.AtEnd, r.Finished, want)
	}
	var b strings.Builder
	if err := WriteSummary(&b, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"unfinished at the end: running / pending  1 / 1", "GPU hours of work left at the end  40", "trace end"} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(row), " ")) {
			t.Errorf("summary lacks %q:\n%s", row, b.String())
		}
	}
	at.Horizon = 12 * time.Hour
	r, err = Run(tr(), c, nil, NewBaseline(DefaultBaselineConfig()), at)
	if err != nil {
		t.Fatal(err)
	}
	if want := (EndState{Horizon: "horizon"}); r.AtEnd != want || r.Finished != 2 || r.Days != 0.5 {
		t.Errorf("with a 12h horizon: %+v, %d finished, %v days; want %+v, 2, 0.5", r.AtEnd, r.Finished, r.Days, want)
	}
}

// Every job submitted after the warm-up is in every policy's waits: one
// killed at a drain deadline before it was ever fully placed counts, with
// its wait to the end, as never started.
func TestWaitsCountJobsKilledBeforeStart(t *testing.T) {
	c := UniformCluster(2, 8)
	tr := &Trace{
		Jobs: []JobSpec{
			// fill holds default-1 (both nodes free at 0: the draw decides
			// where it lands, so the health row follows it below).
			{ID: "fill", Class: ClassOther, Count: 1, GPUs: 8, Work: 100 * time.Hour, Baseline: LevelHigh},
			{ID: "two", Submit: time.Second, Class: ClassTrain, Count: 2, GPUs: 8, Work: time.Hour},
		},
	}
	opts := DefaultOptions()
	opts.Horizon = 20 * time.Hour
	probe, err := Run(tr, c, nil, NewBaseline(DefaultBaselineConfig()), opts)
	if err != nil {
		t.Fatal(err)
	}
	twoNode := int32(-1)
	for _, a := range probe.allocRecords {
		if probe.jobRecords[a.job].spec.ID == "two" {
			twoNode = a.node
		}
	}
	if twoNode < 0 {
		t.Fatal("two placed no allocation; the test needs it placed in part")
	}
	tr.Health = []HealthEvent{{At: time.Hour, Node: "default-" + itoa(int(twoNode)), GPU: -1, Reason: "xid 79"}}
	for _, p := range []Policy{NewBaseline(DefaultBaselineConfig()), mustAllot(t)} {
		r, err := Run(tr, c, nil, p, opts)
		if err != nil {
			t.Fatal(err)
		}
		var train *ClassWaits
		for k := range r.Waits {
			if r.Waits[k].Class == "train" {
				train = &r.Waits[k]
			}
		}
		if train == nil || train.Jobs != 1 || train.Censored != 1 || train.P50 != float64(20*3600-1) {
			t.Errorf("%s: train waits %+v; want two counted, never started, waiting 20h-1s", p.Name(), train)
		}
		if p.Name() == "baseline" && (r.Dead != 1 || train == nil || train.CensoredKilled != 1) {
			t.Errorf("baseline: %d killed, train %+v; want two killed at the drain deadline before it started", r.Dead, train)
		}
	}
}

func mustAllot(t *testing.T) Policy {
	t.Helper()
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	return p
}
