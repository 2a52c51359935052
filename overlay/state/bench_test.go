package state

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// fill14Days charges 1,000 leaves for 14 days of 1-minute buckets, through
// Apply, with amounts that vary by leaf and hour (so nothing compresses to
// a constant), plus demand.
func fill14Days(b *testing.B, f *FSM) {
	const leaves = 1000
	start := t0
	for h := 0; h < 14*24; h++ {
		from, to := start.Add(time.Duration(h)*time.Hour), start.Add(time.Duration(h+1)*time.Hour)
		charges := make([]Charge, leaves)
		demand := make([]DemandSample, leaves)
		for l := 0; l < leaves; l++ {
			leaf := fmt.Sprintf("org/team-%03d/leaf-%d", l/10, l)
			gpus := 1 + (l*7+h*3)%16
			charges[l] = Charge{Alloc: fmt.Sprintf("alloc-%d", l), Leaf: leaf, GPUs: gpus, From: from, To: to}
			demand[l] = DemandSample{Leaf: leaf, GPUs: gpus + l%5, From: from, To: to}
		}
		mustApply(b, f, ChargeType, ChargeRequest{Charges: charges})
		mustApply(b, f, DemandType, DemandRequest{Samples: demand})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkLedger14Days measures the state of 1,000 leaves × 14 days of
// 1-minute buckets: heap held, the ledger's own size, and the time of one
// snapshot (capture + persist) and one restore. Limits: 256 MiB and 5 s.
func BenchmarkLedger14Days(b *testing.B) {
	before := heapInUse()
	f := newFSM(b, FSMConfig{})
	fill14Days(b, f)
	heap := heapInUse() - before
	var ledgerBytes int64
	f.WithLedger(func(l *budgets.Ledger) { ledgerBytes = l.SizeBytes() })
	b.ResetTimer()
	var snapTotal, restoreTotal time.Duration
	var size int
	for i := 0; i < b.N; i++ {
		t := time.Now()
		data := snapshotBytes(b, f)
		snapTotal += time.Since(t)
		size = len(data)
		g := newFSM(b, FSMConfig{})
		t = time.Now()
		if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
		restoreTotal += time.Since(t)
	}
	b.StopTimer()
	snap, restore := snapTotal.Seconds()/float64(b.N), restoreTotal.Seconds()/float64(b.N)
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(ledgerBytes)/(1<<20), "ledger-MiB")
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MiB")
	b.ReportMetric(snap, "snapshot-s")
	b.ReportMetric(restore, "restore-s")
	if heap > 256<<20 || snap > 5 || restore > 5 {
		b.Fatalf("over the limits: heap %d MiB (≤ 256), snapshot %.2fs, restore %.2fs (≤ 5 s each)", heap>>20, snap, restore)
	}
}
