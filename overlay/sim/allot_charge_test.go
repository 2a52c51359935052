package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// TestAllotChargeSpreadsAndRefuses: the allot policy charges its ledger as
// the server does (spread over the buckets, with budgets.Ledger.WriteSpans),
// and a charge the ledger refuses is an error of the run, not usage
// quietly lost.
func TestAllotChargeSpreadsAndRefuses(t *testing.T) {
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "r", Share: 1}, {Path: "r/a", Share: 1}, {Path: "r/b", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a := &Allot{tree: tree, ledger: budgets.NewLedger(budgets.LedgerConfig{Bucket: time.Minute})}
	s := &State{m: &metrics{}}
	s.m.leafRun = []int64{8, 2}
	s.now = 150 // 2.5 minutes
	a.charge(s)
	if a.Err() != nil || a.charged != 150 {
		t.Fatalf("charge: err %v, charged through %d", a.Err(), a.charged)
	}
	for m, want := range []int64{8 * 60, 8 * 60, 8 * 30} {
		from := at(int64(60 * m))
		if got := a.ledger.Usage("r/a", from, from.Add(time.Minute)); got != want {
			t.Fatalf("leaf a, minute %d: %d GPU-seconds, want %d (spread over the buckets)", m, got, want)
		}
	}
	if got := a.ledger.Usage("r/b", at(0), at(150)); got != 2*150 {
		t.Fatalf("leaf b: %d GPU-seconds, want %d", got, 2*150)
	}
	s.m.leafRun = []int64{1 << 30, 1} // more than a bucket holds
	s.now = 300
	a.charge(s)
	if !errors.Is(a.Err(), budgets.ErrBucketOverflow) || !strings.Contains(a.Err().Error(), `"r/a"`) || a.charged != 150 {
		t.Fatalf("overflowing charge: err %v, charged through %d", a.Err(), a.charged)
	}
	if got := a.ledger.Usage("r/b", at(150), at(300)); got != 0 {
		t.Fatalf("leaf b was charged %d GPU-seconds by a refused batch", got)
	}
}
