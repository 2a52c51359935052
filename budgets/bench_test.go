package budgets

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// benchTree is a 4-level tree (root, 10 programs, 10 projects each, 10 teams
// each): 1,000 leaves with random integer shares.
func benchTree(b *testing.B) *Tree {
	rng := rand.New(rand.NewPCG(1, 1))
	specs := []Spec{{Path: "inst"}}
	for p := range 10 {
		pp := fmt.Sprintf("inst/prog%d", p)
		specs = append(specs, Spec{Path: pp, Share: float64(1 + rng.IntN(100))})
		for q := range 10 {
			qp := fmt.Sprintf("%s/proj%d", pp, q)
			specs = append(specs, Spec{Path: qp, Share: float64(1 + rng.IntN(100))})
			for r := range 10 {
				specs = append(specs, Spec{Path: fmt.Sprintf("%s/team%d", qp, r), Share: float64(1 + rng.IntN(100))})
			}
		}
	}
	tr, err := NewTree(specs)
	if err != nil {
		b.Fatal(err)
	}
	return tr
}

// fillLedger charges (and, if demand, adds demand to) every leaf in every
// minute of [end-d, end): 1-8 GPUs, changing every two hours on average, a
// third of leaves idle.
func fillLedger(b *testing.B, l *Ledger, tr *Tree, end time.Time, d time.Duration, demand bool) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, leaf := range tr.Leaves() {
		if rng.IntN(3) == 0 {
			continue
		}
		gpus := int64(1 + rng.IntN(8))
		for at := end.Add(-d); at.Before(end); at = at.Add(time.Minute) {
			if rng.IntN(120) == 0 {
				gpus = int64(1 + rng.IntN(8))
			}
			if err := l.charge(leaf.Path, at, gpus*60); err != nil {
				b.Fatal(err)
			}
			if demand {
				if err := l.addDemand(leaf.Path, at, 2*gpus*60); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkFairShare1000Leaves is one full recomputation of the order: the
// 7-day window usage of 1,000 leaves from a 1-minute ledger, then Fair Tree.
func BenchmarkFairShare1000Leaves(b *testing.B) {
	tr := benchTree(b)
	l := NewLedger(LedgerConfig{})
	now := t0.Add(7 * 24 * time.Hour)
	fillLedger(b, l, tr, now, 7*24*time.Hour, false)
	var f FairShare
	var usage []int64
	b.ReportAllocs()
	for b.Loop() {
		usage = l.UsageByLeaf(tr, now.Add(-7*24*time.Hour), now, usage)
		f.Recompute(tr, usage)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/recompute")
}

// BenchmarkFairShareOrderOnly is Recompute alone, on fixed usages.
func BenchmarkFairShareOrderOnly(b *testing.B) {
	tr := benchTree(b)
	rng := rand.New(rand.NewPCG(3, 3))
	usage := make([]int64, len(tr.Leaves()))
	for i := range usage {
		usage[i] = rng.Int64N(7 * 24 * 3600 * 8)
	}
	var f FairShare
	b.ReportAllocs()
	for b.Loop() {
		f.Recompute(tr, usage)
	}
}

// BenchmarkWindowSum is one leaf's 7-day sum; the misaligned window ends
// mid-block, the worst case for the in-block scans.
func BenchmarkWindowSum(b *testing.B) {
	tr := benchTree(b)
	l := NewLedger(LedgerConfig{})
	now := t0.Add(7 * 24 * time.Hour)
	fillLedger(b, l, tr, now, 7*24*time.Hour, false)
	leaf := tr.Leaves()[1].Path
	for _, w := range []struct {
		name string
		from time.Time
		to   time.Time
	}{
		{"7d", now.Add(-7 * 24 * time.Hour), now},
		{"7d-misaligned", now.Add(-7*24*time.Hour - 23*time.Minute), now.Add(-9 * time.Minute)},
		{"1h", now.Add(-time.Hour), now},
	} {
		b.Run(w.name, func(b *testing.B) {
			var sink int64
			for b.Loop() {
				sink += l.Usage(leaf, w.from, w.to)
			}
			if sink == 0 {
				b.Fatal("no usage")
			}
		})
	}
}

// BenchmarkLedgerWrite is one charge at the newest bucket and one 3 days late.
func BenchmarkLedgerWrite(b *testing.B) {
	l := NewLedger(LedgerConfig{})
	now := t0
	b.Run("head", func(b *testing.B) {
		for b.Loop() {
			now = now.Add(time.Second)
			_ = l.charge("a", now, 480)
		}
	})
	b.Run("3d-late", func(b *testing.B) {
		for b.Loop() {
			_ = l.charge("a", now.Add(-72*time.Hour), 480)
		}
	})
}

// BenchmarkLedgerMemory14d fills 1,000 leaves × 14 days of 1-minute buckets,
// charged and demand, and reports the heap the ledger holds (MiB).
func BenchmarkLedgerMemory14d(b *testing.B) {
	tr := benchTree(b)
	now := t0.Add(14 * 24 * time.Hour)
	var heap, arrays float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := NewLedger(LedgerConfig{})
		// Every leaf busy, so every series holds a full ring.
		for i, leaf := range tr.Leaves() {
			for at := now.Add(-14 * 24 * time.Hour); at.Before(now); at = at.Add(time.Minute) {
				_ = l.charge(leaf.Path, at, int64(i%8+1)*60)
				_ = l.addDemand(leaf.Path, at, int64(i%8+2)*60)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
		arrays = float64(l.SizeBytes()) / (1 << 20)
		runtime.KeepAlive(l)
	}
	b.ReportMetric(heap, "MiB")
	b.ReportMetric(arrays, "MiB-arrays")
}

// BenchmarkLedgerMarshal7d encodes 1,000 leaves × 7 days (charged and
// demand) and reports the snapshot size.
func BenchmarkLedgerMarshal7d(b *testing.B) {
	tr := benchTree(b)
	l := NewLedger(LedgerConfig{})
	now := t0.Add(7 * 24 * time.Hour)
	fillLedger(b, l, tr, now, 7*24*time.Hour, true)
	var size int
	for b.Loop() {
		data, err := l.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(float64(size)/(1<<10), "KiB")
}
