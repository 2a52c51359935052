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
	for i := 0; i < b.N; i++ {
		r, err := Run(tr, UniformCluster(gpus/8, 8), tree, mk(), DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(days*float64(b.N)/sec, "sim-days/s")
	b.ReportMetric(float64(events)/sec, "events/s")
	b.ReportMetric(float64(len(tr.Jobs)), "jobs")
}

func BenchmarkSimBaseline30d1024GPUs(b *testing.B) {
	benchRun(b, func() Policy { return NewBaseline(DefaultBaselineConfig()) }, 30, 1024)
}

func BenchmarkSimAllot1d1024GPUs(b *testing.B) {
	benchRun(b, func() Policy {
		p, err := NewAllot(policyDefault())
		if err != nil {
			b.Fatal(err)
		}
		return p
	}, 1, 1024)
}

// BenchmarkSimAllot3d6496GPUs is the shape of the run published with
// Alibaba's GPU cluster trace simulator (3 days, 6,496 GPUs on 812 nodes ×
// 8), on the example scenario's generator with debug work scaled to the
// cluster: what the README's scale comparison times.
func BenchmarkSimAllot3d6496GPUs(b *testing.B) {
	benchRun(b, func() Policy {
		p, err := NewAllot(policyDefault())
		if err != nil {
			b.Fatal(err)
		}
		return p
	}, 3, 6496)
}

func BenchmarkSimBaseline3d6496GPUs(b *testing.B) {
	benchRun(b, func() Policy { return NewBaseline(DefaultBaselineConfig()) }, 3, 6496)
}
