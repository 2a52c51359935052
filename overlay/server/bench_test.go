package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/state"
)

// BenchmarkClusterLedgerAppend commits ledger charges through a 3-server
// cluster on loopback (real TCP transport, boltdb log stores): each op is one
// raft entry carrying `batch` charges, sent by 16 concurrent writers so that
// raft can pipeline and group-commit.
func BenchmarkClusterLedgerAppend(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c := newCluster(b, 3, fastRaft())
			lead := c.nodes[c.leader()].srv
			if _, _, err := lead.Apply(state.BudgetsApplyType, state.BudgetsApplyRequest{Revision: "r",
				Specs: toSpecs(testBudgets()), AppliedAt: tBase}); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						k := next.Add(1) - 1
						if k >= int64(b.N) {
							return
						}
						charges := make([]state.Charge, batch)
						for i := range charges {
							from := tBase.Add(time.Duration(k) * time.Minute)
							charges[i] = state.Charge{Alloc: fmt.Sprintf("a-%d-%d", k, i), Leaf: "ai2/nlp", GPUs: 8, From: from, To: from.Add(time.Minute)}
						}
						if _, _, err := lead.Apply(state.ChargeType, state.ChargeRequest{Charges: charges}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			secs := time.Since(start).Seconds()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/secs, "entries/s")
			b.ReportMetric(float64(b.N*batch)/secs, "charges/s")
		})
	}
}
