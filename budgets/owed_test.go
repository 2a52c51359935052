package budgets

import (
	"math"
	"testing"
	"time"
)

// perMinute writes gpus × 60 GPU-seconds into every minute bucket of [from, to).
func perMinute(t *testing.T, write func(string, time.Time, int64) error, leaf string, from, to time.Time, gpus int64) {
	t.Helper()
	for at := from; at.Before(to); at = at.Add(time.Minute) {
		mustWrite(t, write(leaf, at, gpus*60))
	}
}

func TestOwedReportPublishedExample(t *testing.T) {
	tr := publishedTree(t) // ai2{prior 50{olmo 70, vision 30}, robotics 50}: olmo 35%
	l := NewLedger(LedgerConfig{})
	h1, h2, end := t0, t0.Add(time.Hour), t0.Add(2*time.Hour)
	// olmo wants the whole 100-GPU cluster for two hours; it is owed its 35
	// GPUs each hour. It gets 50 GPUs in hour 1 (surplus, credited up to 35)
	// and 17.5 in hour 2 (half of what it was owed).
	perMinute(t, l.addDemand, "ai2/prior/olmo", h1, end, 100)
	perMinute(t, l.charge, "ai2/prior/olmo", h1, h2, 50)
	for at := h2; at.Before(end); at = at.Add(time.Minute) {
		mustWrite(t, l.charge("ai2/prior/olmo", at, 1050)) // 17.5 GPUs
	}
	// vision wants 10 GPUs, under its 15 GPU share: owed 10, gets them.
	perMinute(t, l.addDemand, "ai2/prior/vision", h1, end, 10)
	perMinute(t, l.charge, "ai2/prior/vision", h1, end, 10)
	// robotics wants nothing yet runs 5 GPUs: nothing owed, ratio 1.
	perMinute(t, l.charge, "ai2/robotics", h1, end, 5)

	got := OwedReport(tr, l, 100, h1, end)
	want := []Delivery{
		{Path: "ai2", Owed: 324000, Delivered: 315000 + 36000, Credited: 261000,
			Ratio: 351000.0 / 324000, CreditedRatio: 261000.0 / 324000},
		{Path: "ai2/prior", Owed: 324000, Delivered: 243000 + 72000, Credited: 261000,
			Ratio: 315000.0 / 324000, CreditedRatio: 261000.0 / 324000},
		// Over the two hours olmo got 243,000 of 252,000 owed (96%); hour by
		// hour, its first hour's surplus does not pay for the second's
		// shortfall (75%).
		{Path: "ai2/prior/olmo", Owed: 2 * 126000, Delivered: 180000 + 63000, Credited: 126000 + 63000,
			Ratio: 243000.0 / 252000, CreditedRatio: 0.75},
		{Path: "ai2/prior/vision", Owed: 72000, Delivered: 72000, Credited: 72000, Ratio: 1, CreditedRatio: 1},
		{Path: "ai2/robotics", Owed: 0, Delivered: 36000, Credited: 0, Ratio: 1, CreditedRatio: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if g, w := got[i], want[i]; g.Path != w.Path || g.Owed != w.Owed || g.Delivered != w.Delivered ||
			g.Credited != w.Credited || math.Abs(g.Ratio-w.Ratio) > 1e-15 || math.Abs(g.CreditedRatio-w.CreditedRatio) > 1e-15 {
			t.Errorf("row %d = %+v\n          want %+v", i, g, w)
		}
	}
}

func TestOwedReportPartialHoursAndEdges(t *testing.T) {
	tr := publishedTree(t)
	l := NewLedger(LedgerConfig{})
	perMinute(t, l.addDemand, "ai2/robotics", t0, t0.Add(2*time.Hour), 40)
	perMinute(t, l.charge, "ai2/robotics", t0, t0.Add(time.Hour), 60)
	// [t0+30m, t0+90m) is two half-hour periods; robotics (50% of 100 GPUs)
	// is owed min(50, 40) GPUs × 1800 s in each and gets 60 then 0 GPUs.
	got := OwedReport(tr, l, 100, t0.Add(30*time.Minute), t0.Add(90*time.Minute))
	r := got[4]
	if r.Path != "ai2/robotics" || r.Owed != 2*40*1800 || r.Delivered != 60*1800 || r.Credited != 40*1800 ||
		r.Ratio != 0.75 || r.CreditedRatio != 0.5 {
		t.Errorf("robotics = %+v", r)
	}
	// Capacity prorates: a 15-minute window owes 50 × 900 at most.
	l2 := NewLedger(LedgerConfig{})
	perMinute(t, l2.addDemand, "ai2/robotics", t0, t0.Add(time.Hour), 1000)
	if r := OwedReport(tr, l2, 100, t0.Add(45*time.Minute), t0.Add(time.Hour))[4]; r.Owed != 50*900 || r.Ratio != 0 || r.CreditedRatio != 0 {
		t.Errorf("quarter hour = %+v, want owed %d ratio 0", r, 50*900)
	}
	for _, rows := range [][]Delivery{
		OwedReport(tr, l, 100, t0.Add(time.Hour), t0), // inverted window
		OwedReport(tr, l, 0, t0, t0.Add(time.Hour)),   // no capacity
	} {
		for _, d := range rows {
			if d.Owed != 0 || d.Ratio != 1 || d.CreditedRatio != 1 {
				t.Errorf("empty report row %+v", d)
			}
		}
	}
}
