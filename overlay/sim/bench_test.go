package sim

import "testing"

// benchRun runs one policy on the example scenario for days simulated days
// and reports simulated days and events per second of wall time.
func benchRun(b *testing.B, mk func() Policy, days float64, gpus int) {
	tree := exampleTree(b)
	g := DefaultGenConfig()
	g.Days, g.GPUs, g.Nodes = days, gpus, gpus/8
	g.DebugPerDay *= float64(gpus) / 1024
	tr, err := Generate(tree, g)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var events int64
	var simDays float64
	for i := 0; i < b.N; i++ {
		r, err := Run(tr, UniformCluster(gpus/8, 8), tree, mk(), DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
		simDays += r.Days // the run goes on to the trace's last event (a repair may come after the last submission)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(simDays/sec, "sim-days/s")
	b.ReportMetric(float64(events)/sec, "events/s")
	b.ReportMetric(float64(len(tr.Jobs)), "jobs")
}

// newAllotBench makes the allot policy with its defaults for each run.
func newAllotBench(b *testing.B) func() Policy {
	return func() Policy {
		p, err := NewAllot(policyDefault())
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
}

func BenchmarkSimBaseline30d1024GPUs(b *testing.B) {
	benchRun(b, func() Policy { return NewBaseline(DefaultBaselineConfig()) }, 30, 1024)
}

func BenchmarkSimAllot1d1024GPUs(b *testing.B) {
	benchRun(b, newAllotBench(b), 1, 1024)
}

// BenchmarkSimAllot1d6496GPUs is the shape of the run published with
// Alibaba's GPU cluster trace simulator (about 20,000 jobs on 6,500 GPUs):
// 812 nodes × 8, the example scenario's generator with debug work scaled
// to the cluster, one day of submissions (21,131 jobs); the run goes on to
// the last repair. What the scale comparison of docs/policy-suite.md
// ("Scale") times.
func BenchmarkSimAllot1d6496GPUs(b *testing.B) {
	benchRun(b, newAllotBench(b), 1, 6496)
}

func BenchmarkSimBaseline1d6496GPUs(b *testing.B) {
	benchRun(b, func() Policy { return NewBaseline(DefaultBaselineConfig()) }, 1, 6496)
}

// BenchmarkSimAllot3d6496GPUs is the same cluster over three days of
// submissions (62,649 jobs).
func BenchmarkSimAllot3d6496GPUs(b *testing.B) {
	benchRun(b, newAllotBench(b), 3, 6496)
}

func BenchmarkSimBaseline3d6496GPUs(b *testing.B) {
	benchRun(b, func() Policy { return NewBaseline(DefaultBaselineConfig()) }, 3, 6496)
}
