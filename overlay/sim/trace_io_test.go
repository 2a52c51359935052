package sim

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTraceRoundTrip(t *testing.T) {
	tr, err := Generate(exampleTree(t), GenConfig{Seed: 3, Days: 1, GPUs: 64, Demand: 2.2, Allocated: 2, DebugPerDay: 50,
		InteractivePerDay: 5, Resumable: .8, HighInflation: .7, TrainSizes: []int{8, 16},
		TrainWeights: []float64{1, 1}, TrainWorkMin: 3600e9, TrainWorkMax: 7200e9, Failures: 2, Nodes: 8,
		RepairMin: 3600e9, RepairMax: 7200e9, TrainNotice: 5 * time.Minute, InteractiveNotice: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	noticed := 0
	for _, j := range tr.Jobs {
		if j.Notice > 0 {
			noticed++
		}
	}
	if noticed == 0 {
		t.Fatal("the generated trace has no job with a checkpoint notice")
	}
	tr.Jobs[1].KillTimeout = 2 * time.Minute // the generator declares none
	for name, rw := range map[string]struct {
		write     func(*bytes.Buffer, *Trace) error
		read      func(*bytes.Buffer) (*Trace, error)
		firstLine int // of the first job
	}{
		"csv":   {func(b *bytes.Buffer, t *Trace) error { return WriteCSV(b, t) }, func(b *bytes.Buffer) (*Trace, error) { return ReadCSV(b, ReadOptions{}) }, 2},
		"jsonl": {func(b *bytes.Buffer, t *Trace) error { return WriteJSONL(b, t) }, func(b *bytes.Buffer) (*Trace, error) { return ReadJSONL(b, ReadOptions{}) }, 1},
	} {
		var b bytes.Buffer
		if err := rw.write(&b, tr); err != nil {
			t.Fatal(name, err)
		}
		back, err := rw.read(&b)
		if err != nil {
			t.Fatal(name, err)
		}
		// Read rows know their line: the header is line 1 in CSV, and
		// health rows follow the jobs.
		for k := range back.Jobs {
			if want := k + rw.firstLine; back.Jobs[k].Line != want {
				t.Fatalf("%s: job %d read from line %d, want %d", name, k, back.Jobs[k].Line, want)
			}
			back.Jobs[k].Line = 0
		}
		for k := range back.Health {
			back.Health[k].Line = 0
		}
		if !reflect.DeepEqual(back.Jobs, tr.Jobs) || !reflect.DeepEqual(back.Health, tr.Health) {
			t.Errorf("%s: the trace changed in a round trip", name)
		}
	}
}

func TestTraceInvalidRows(t *testing.T) {
	in := "submit,job,budget,class,count,gpus,work,min_runtime\n" +
		"0,a,x,debug,1,2,10m,5m\n" +
		"60,b,x,debug,1,0,10m,5m\n" + // 0 GPUs
		"120,c,x,nonsense,1,2,10m,5m\n" +
		"180,d,x,train,2,8,4h,1h\n"
	_, err := ReadCSV(strings.NewReader(in), ReadOptions{})
	if !errors.Is(err, ErrInvalidTrace) || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "between 1 and 64") {
		t.Fatalf("error %v: want line 3 and what is valid", err)
	}
	tr, err := ReadCSV(strings.NewReader(in), ReadOptions{SkipInvalid: true})
	if err != nil || tr.Skipped != 2 || len(tr.Jobs) != 2 {
		t.Fatalf("skip-invalid: %v, skipped %d, jobs %d; want 2 skipped, 2 kept", err, tr.Skipped, len(tr.Jobs))
	}
	_, err = ReadJSONL(strings.NewReader("{\"submit\":0,\"job\":\"a\",\"gpus\":1,\"work\":60}\n{bad\n"), ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("jsonl error %v: want line 2", err)
	}
	_, err = ReadCSV(strings.NewReader("submit,when\n"), ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "valid columns") {
		t.Fatalf("unknown column: %v", err)
	}
}

func TestRunHealthEventUnknownNode(t *testing.T) {
	tr := &Trace{Jobs: []JobSpec{{ID: "a", Count: 1, GPUs: 1, Work: 60e9}}, Health: []HealthEvent{{Node: "nope", GPU: -1}}}
	if _, err := Run(tr, UniformCluster(2, 8), nil, NewBaseline(DefaultBaselineConfig()), DefaultOptions()); err == nil ||
		!strings.Contains(err.Error(), "default-0") {
		t.Fatalf("error %v: want the valid node names", err)
	}
}

// sortJobs is a stable sort by submit time.
func TestSortJobsStable(t *testing.T) {
	var jobs []JobSpec
	for i := 0; i < 300; i++ {
		jobs = append(jobs, JobSpec{ID: fmt.Sprint(i), Submit: time.Duration((i*7919)%13) * time.Minute})
	}
	got := sortJobs(slices.Clone(jobs))
	want := slices.Clone(jobs)
	slices.SortStableFunc(want, func(a, b JobSpec) int { return compareDur(a.Submit, b.Submit) })
	for i := range want {
		if got[i].ID != want[i].ID {
			t.Fatalf("position %d: %s, want %s", i, got[i].ID, want[i].ID)
		}
	}
}
