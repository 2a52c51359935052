package state

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

func usageOf(f *FSM, leaf string, from, to time.Time) int64 {
	var u int64
	f.WithLedger(func(l *budgets.Ledger) { u = l.Usage(leaf, from, to) })
	return u
}

func applyCharges(t *testing.T, f *FSM, req ChargeRequest) ChargeResult {
	t.Helper()
	data, err := Encode(ChargeType, req)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := f.ApplyEntry(data).(ChargeResult)
	if !ok {
		t.Fatalf("apply: %v", f.ApplyEntry(data))
	}
	return res
}

// TestFutureChargeKeepsLedger is issue 14's first case in the FSM: a charge
// dated 2036 moved the ledger's horizon past every bucket it held, on every
// replica, and every later charge was acknowledged and dropped. The FSM now
// refuses it, with the leader's Now (checked against the window) and in an
// entry without Now (a log written by an older leader: the ledger's bound).
func TestFutureChargeKeepsLedger(t *testing.T) {
	future := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		now     time.Time // zero: an entry from before Now existed
		wantErr string
	}{
		{"leader's clock in the entry", t0.Add(10 * time.Minute), "charge.from 2036-01-01T00:00:00Z is outside [2026-02-16T09:12:00Z, 2026-03-02T09:11:00Z]"},
		{"entry without a clock", time.Time{}, "starts more than 1h0m0s after the ledger's newest bucket: not charged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFSM(t, FSMConfig{})
			for k := 0; k < 5; k++ {
				from := t0.Add(time.Duration(k) * time.Minute)
				r := applyCharges(t, f, ChargeRequest{Now: tc.now, Charges: []Charge{{Alloc: "a1", Leaf: "root/a", GPUs: 1, From: from, To: from.Add(time.Minute)}}})
				if r.Err != nil || r.GPUSeconds != 60 {
					t.Fatalf("charge %d: %+v", k, r)
				}
			}
			horizon, _ := f.ledger.Horizon()
			r := applyCharges(t, f, ChargeRequest{Now: tc.now, Charges: []Charge{{Alloc: "t", Leaf: "root/a", GPUs: 1, From: future, To: future.Add(time.Minute)}}})
			if r.GPUSeconds != 0 || r.Skipped != 1 || r.Err == nil || !strings.Contains(r.Err.Error(), tc.wantErr) {
				t.Fatalf("2036 charge: %+v, want refused with %q", r, tc.wantErr)
			}
			if h, _ := f.ledger.Horizon(); !h.Equal(horizon) {
				t.Fatalf("horizon moved from %v to %v", horizon, h)
			}
			r = applyCharges(t, f, ChargeRequest{Now: tc.now, Charges: []Charge{{Alloc: "a1", Leaf: "root/a", GPUs: 1, From: t0.Add(5 * time.Minute), To: t0.Add(6 * time.Minute)}}})
			if r.Err != nil || r.GPUSeconds != 60 {
				t.Fatalf("later charge: %+v", r)
			}
			if got := usageOf(f, "root/a", t0.Add(-time.Hour), t0.Add(time.Hour)); got != 6*60 {
				t.Fatalf("usage %d, want %d: acknowledged charges were lost", got, 6*60)
			}
		})
	}
}

// TestChargeBoundsNamed: out-of-range items are refused with the field and
// the valid range; 2^63-1 GPUs used to overflow and be skipped silently.
func TestChargeBoundsNamed(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	now := t0.Add(time.Hour)
	r := applyCharges(t, f, ChargeRequest{Now: now, Charges: []Charge{
		{Alloc: "a", Leaf: "x", GPUs: math.MaxInt64, From: t0, To: t0.Add(time.Minute)},
		{Alloc: "b", Leaf: "x", GPUs: -1, From: t0, To: t0.Add(time.Minute)},
		{Alloc: strings.Repeat("z", 900_000), Leaf: "x", GPUs: 1, From: t0, To: t0.Add(time.Minute)},
		{Alloc: "c", Leaf: "x", GPUs: 1, From: t0.Add(-15 * 24 * time.Hour), To: t0},
		{Alloc: "d", Leaf: "x", GPUs: 1, From: now, To: now.Add(2 * time.Minute)},
		{Alloc: "e", Leaf: "x", GPUs: 1, From: now, To: now.Add(-time.Minute)},
		{Alloc: "ok", Leaf: "x", GPUs: 2, From: t0, To: t0.Add(time.Minute)},
	}})
	msg := r.Err.Error()
	for _, want := range []string{
		"charge.gpus = 9223372036854775807: want 0 to 1048576",
		"charge.gpus = -1: want 0 to 1048576",
		"alloc is 900000 bytes; at most 256 are allowed",
		"charge.from 2026-02-15T09:00:00Z is outside [2026-02-16T10:02:00Z, 2026-03-02T10:01:00Z]",
		"charge.to 2026-03-02T10:02:00Z is outside",
		"charge: to 2026-03-02T09:59:00Z is before from 2026-03-02T10:00:00Z",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
	if len(msg) > 4000 {
		t.Errorf("errors are %d bytes: the 900 KB ID was echoed", len(msg))
	}
	if r.GPUSeconds != 120 || r.Skipped != 6 {
		t.Fatalf("result %+v, want only the last charge applied", r)
	}
	if !errors.Is(r.Err, ErrOutOfBounds) {
		t.Fatalf("errors do not wrap ErrOutOfBounds: %v", r.Err)
	}
}

// TestLongChargeWalksAtMostMaxAdvance: an interval reaching far ahead (an
// old leader's jumped clock) is charged one MaxAdvance per entry at most,
// and what it did not charge stays due instead of being dropped.
func TestLongChargeWalksAtMostMaxAdvance(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	applyCharges(t, f, ChargeRequest{Charges: []Charge{{Alloc: "a1", Leaf: "x", GPUs: 1, From: t0, To: t0.Add(time.Minute)}}})
	r := applyCharges(t, f, ChargeRequest{Charges: []Charge{{Alloc: "a1", Leaf: "x", GPUs: 1, From: t0, To: t0.Add(10 * 24 * time.Hour)}}})
	if want := int64(time.Hour / time.Second); r.GPUSeconds != want || r.Err == nil || !strings.Contains(r.Err.Error(), "charged only up to 2026-03-02T10:01:00Z") {
		t.Fatalf("long charge: %+v, want %d GPU-seconds and the cut reported", r, want)
	}
	if a := f.Read().Alloc("a1"); !a.ChargedThrough.Equal(t0.Add(time.Hour + time.Minute)) {
		t.Fatalf("ChargedThrough %v, want the point the charge stopped", a.ChargedThrough)
	}
	if h, _ := f.ledger.Head(); !h.Equal(t0.Add(time.Hour)) {
		t.Fatalf("head %v, want one hour on", h)
	}
}

// TestLeaderBackAfterOutageCatchesUp: a leader whose Now is hours past the
// ledger's newest bucket (allot was down) moves the ledger one MaxAdvance
// per entry; a charge beyond the bound is refused, not dropped, and goes in
// once the ledger has caught up.
func TestLeaderBackAfterOutageCatchesUp(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	applyCharges(t, f, ChargeRequest{Now: t0, Charges: []Charge{{Alloc: "a1", Leaf: "x", GPUs: 1, From: t0.Add(-time.Minute), To: t0}}})
	now := t0.Add(3 * time.Hour)
	late := Charge{Alloc: "new", Leaf: "x", GPUs: 4, From: now.Add(-10 * time.Minute), To: now}
	var passes int
	for passes = 1; passes <= 5; passes++ {
		r := applyCharges(t, f, ChargeRequest{Now: now, Charges: []Charge{late}})
		if r.GPUSeconds > 0 {
			break
		}
		if r.Err == nil {
			t.Fatalf("pass %d: nothing charged and no error", passes)
		}
	}
	// The charge ends 3h after the newest bucket: the first two entries
	// move the ledger an hour each, the third may write up to 3h1m.
	if passes != 3 {
		t.Fatalf("charged after %d entries, want 3", passes)
	}
	if got := usageOf(f, "x", now.Add(-time.Hour), now); got != 4*600 {
		t.Fatalf("usage %d, want %d", got, 4*600)
	}
}

func TestDemandFutureRefused(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	now := t0.Add(time.Hour)
	data, _ := Encode(DemandType, DemandRequest{Now: now, Samples: []DemandSample{
		{Leaf: "x", GPUs: 1, From: t0, To: t0.Add(time.Minute)},
		{Leaf: "y", GPUs: 1, From: time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2036, 1, 1, 0, 1, 0, 0, time.UTC)},
	}})
	r := f.ApplyEntry(data).(ChargeResult)
	if r.GPUSeconds != 60 || r.Err == nil || !strings.Contains(r.Err.Error(), "demand.from 2036-01-01T00:00:00Z is outside") {
		t.Fatalf("demand: %+v", r)
	}
}

func TestBudgetsApplySizesBounded(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	specs := sampleSpecs()
	specs[2].Description = strings.Repeat("d", 7<<20)
	data, _ := Encode(BudgetsApplyType, BudgetsApplyRequest{Revision: "r", Specs: specs, AppliedAt: t0})
	err, _ := f.ApplyEntry(data).(error)
	if err == nil || !strings.Contains(err.Error(), "budgets[2].description is 7340032 bytes; at most 4096 are allowed") {
		t.Fatalf("apply of a 7 MiB description: %v", err)
	}
	if f.Read().Budgets() != nil {
		t.Fatal("the tree was applied")
	}
}

// TestRetentionLongChargeAcknowledgesOnlyWhatIsKept: a charge reaching back
// past retention, ending mid-bucket, used to count its first seconds in the
// answer while the ledger pushed them out at once (found by FuzzApply).
func TestRetentionLongChargeAcknowledgesOnlyWhatIsKept(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	to := t0.Add(29*time.Minute + 36*time.Second)
	r := applyCharges(t, f, ChargeRequest{Charges: []Charge{{Alloc: "a2", Leaf: "x", GPUs: 4, From: to.Add(-50 * 24 * time.Hour), To: to}}})
	got := usageOf(f, "x", to.AddDate(0, -3, 0), to.Add(time.Hour))
	if r.GPUSeconds != got || f.Read().Alloc("a2").ChargedGPUSeconds != got {
		t.Fatalf("acknowledged %d, alloc says %d, ledger holds %d", r.GPUSeconds, f.Read().Alloc("a2").ChargedGPUSeconds, got)
	}
	if r.Err == nil || !strings.Contains(r.Err.Error(), "is older than the ledger keeps") {
		t.Fatalf("the part before retention is not reported: %v", r.Err)
	}
	var dropped int64
	f.WithLedger(func(l *budgets.Ledger) { dropped = l.Dropped() })
	if dropped != 0 {
		t.Fatalf("the ledger dropped %d writes", dropped)
	}
}
