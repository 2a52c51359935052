package budgets

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"
)

// TestLedgerMaxAdvanceRefusesFutureWrite is issue 14's first case at the
// ledger: one write dated ten years ahead used to move the horizon past
// every bucket held, and every later write fell behind it and was dropped.
// With MaxAdvance the far write is refused, nothing moves, and later writes
// still count.
func TestLedgerMaxAdvanceRefusesFutureWrite(t *testing.T) {
	l := NewLedger(LedgerConfig{MaxAdvance: time.Hour})
	mustWrite(t, l.charge("root/a", t0, 60))
	horizon, _ := l.Horizon()
	before, _ := l.MarshalBinary()
	future := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, err := range map[string]error{
		"charge":                    l.charge("root/a", future, 60),
		"demand":                    l.addDemand("root/a", future, 60),
		"charge span":               l.ChargeSpan("root/a", future, future.Add(time.Minute), 1),
		"demand span":               l.AddDemandSpan("root/a", t0, future, 1),
		"advance":                   l.Advance(future),
		"one bucket past the bound": l.charge("root/a", t0.Add(time.Hour+time.Minute), 1),
	} {
		if !errors.Is(err, ErrTooFarAhead) {
			t.Errorf("%s in 2036: err = %v, want ErrTooFarAhead", name, err)
		}
	}
	if after, _ := l.MarshalBinary(); !bytes.Equal(before, after) {
		t.Fatal("a refused write changed the ledger")
	}
	if h, _ := l.Horizon(); !h.Equal(horizon) {
		t.Fatalf("horizon moved from %v to %v", horizon, h)
	}
	mustWrite(t, l.charge("root/a", t0.Add(time.Minute), 60))
	mustWrite(t, l.charge("root/a", t0.Add(time.Hour), 1)) // exactly MaxAdvance ahead: allowed
	if got := l.Usage("root/a", t0, t0.Add(2*time.Hour)); got != 121 {
		t.Fatalf("usage = %d, want 121: a later charge was lost", got)
	}
	if l.Dropped() != 0 {
		t.Fatalf("dropped %d writes", l.Dropped())
	}
	// Time passing with nothing charged: Advance steps forward, at most
	// MaxAdvance per call, and the horizon follows.
	head, _ := l.Head()
	for i := 1; i <= 3; i++ {
		mustWrite(t, l.Advance(head.Add(time.Duration(i)*time.Hour)))
	}
	if h, _ := l.Head(); !h.Equal(head.Add(3 * time.Hour)) {
		t.Fatalf("head after three advances = %v, want %v", h, head.Add(3*time.Hour))
	}
	mustWrite(t, l.charge("root/b", head.Add(4*time.Hour), 5))
}

func TestLedgerMaxAdvanceConfig(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bucket     time.Duration
		maxAdvance time.Duration
		want       time.Duration
	}{
		{"off", time.Minute, 0, 0},
		{"negative is off", time.Minute, -time.Hour, 0},
		{"rounded up to a bucket", time.Minute, 61 * time.Second, 2 * time.Minute},
		{"at least one bucket", time.Minute, time.Nanosecond, time.Minute},
	} {
		l := NewLedger(LedgerConfig{Bucket: tc.bucket, MaxAdvance: tc.maxAdvance})
		if got := l.MaxAdvance(); got != tc.want {
			t.Errorf("%s: MaxAdvance = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The first write to an empty ledger is not bounded; an unbounded
	// ledger takes any write (the simulator's clock is trusted).
	l := NewLedger(LedgerConfig{MaxAdvance: time.Minute})
	mustWrite(t, l.charge("a", t0.Add(1000*time.Hour), 1))
	u := NewLedger(LedgerConfig{})
	mustWrite(t, u.charge("a", t0, 1))
	mustWrite(t, u.charge("a", t0.Add(1000*time.Hour), 1))
}

// ledgerTotal sums a leaf's charges (q 0) or demand (q 1) over all time.
func ledgerTotal(l *Ledger, leaf string, q int) int64 {
	from, to := time.Unix(-secondsLimit, 0), time.Unix(secondsLimit, 0)
	if q == 1 {
		return l.Demand(leaf, from, to)
	}
	return l.Usage(leaf, from, to)
}

// FuzzLedgerCharge drives a bounded ledger (MaxAdvance on) with writes,
// spans, advances and prunes at times anywhere in the int64 range of Unix
// seconds, and checks after every call: a refused call changes nothing; an
// accepted write adds exactly its amount (or is counted as dropped) less
// what the move of the horizon pushed out; the newest bucket and the
// horizon never move more than MaxAdvance in one call (but for the first
// write, and Prune, which moves the horizon on purpose); the encoding round
// trips.
//
// Input: 3 header bytes (bucket 1-3600 s, retention 1-256 buckets, max
// advance 1-16 buckets), then 11 bytes per call: kind, leaf, 8 bytes of
// Unix seconds (little endian, any int64), and an amount or span length.
func FuzzLedgerCharge(f *testing.F) {
	f.Add([]byte{59, 10, 2, 0, 0, 0xa0, 0x1f, 0x70, 0x69, 0, 0, 0, 0, 60, 0, 0, 0x80, 0x8e, 0x0b, 0x7c, 0, 0, 0, 0, 60})
	f.Add([]byte{0, 0, 0, 2, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 255, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		bucket := time.Duration(1+binary.LittleEndian.Uint16([]byte{data[0], data[1] & 0x0f})%3600) * time.Second
		retention := time.Duration(1+int(data[1])) * bucket
		maxAdvance := time.Duration(1+int(data[2]%16)) * bucket
		l := NewLedger(LedgerConfig{Bucket: bucket, Retention: retention, MaxAdvance: maxAdvance})
		leaves := []string{"a", "b/c"}
		for ops := data[3:]; len(ops) >= 11; ops = ops[11:] {
			op := ops[:11]
			leaf := leaves[int(op[1])%len(leaves)]
			at := time.Unix(int64(binary.LittleEndian.Uint64(op[2:10])), 0)
			amount := int64(op[10])
			checkLedgerCall(t, l, op[0]%7, leaf, at, amount)
		}
	})
}

func checkLedgerCall(t *testing.T, l *Ledger, kind byte, leaf string, at time.Time, amount int64) {
	before, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	head0, written := l.Head()
	floor0, dropped0, droppedSec0 := l.floor, l.dropped, l.droppedSeconds
	q := int(kind % 2)
	total0 := ledgerTotal(l, leaf, q)
	var pushedOut int64 // what the call may push out of retention
	if j := l.bucketAt(at); written && j > l.head {
		end := time.Unix(min(j-l.span+1, l.bucketLimit())*l.bucketSec, 0)
		pushedOut = l.Usage(leaf, time.Unix(-secondsLimit, 0), end)
		if q == 1 {
			pushedOut = l.Demand(leaf, time.Unix(-secondsLimit, 0), end)
		}
	}
	var what string
	switch kind {
	case 0, 1:
		what = "write"
		if kind == 0 {
			err = l.charge(leaf, at, amount)
		} else {
			err = l.addDemand(leaf, at, amount)
		}
	case 2, 3:
		what, at = "span", at.Add(-time.Duration(amount)*time.Second) // ends where the other calls land
		end := at.Add(time.Duration(amount) * time.Second)
		if kind == 2 {
			err = l.ChargeSpan(leaf, at, end, 3)
		} else {
			err = l.AddDemandSpan(leaf, at, end, 3)
		}
	case 4:
		what, err = "advance", l.Advance(at)
	case 5:
		what = "prune"
		l.Prune(at)
	case 6:
		what = "round trip"
		var m Ledger
		if err := m.UnmarshalBinary(before); err != nil {
			t.Fatalf("round trip: %v", err)
		}
		m.SetMaxAdvance(l.MaxAdvance())
		*l = m
	}
	after, merr := l.MarshalBinary()
	if merr != nil {
		t.Fatal(merr)
	}
	if err != nil {
		if !bytes.Equal(before, after) {
			t.Fatalf("%s at %d refused (%v) but changed the ledger", what, at.Unix(), err)
		}
		return
	}
	if head, _ := l.Head(); written && what != "prune" && head.Sub(head0) > l.MaxAdvance() {
		t.Fatalf("%s at %d moved the newest bucket from %v to %v, more than %v", what, at.Unix(), head0, head, l.MaxAdvance())
	}
	if written && what != "prune" && floor0 != math.MinInt64 && l.floor-floor0 > l.maxAhead {
		t.Fatalf("%s at %d moved the horizon %d buckets, more than %d", what, at.Unix(), l.floor-floor0, l.maxAhead)
	}
	if what == "round trip" && !bytes.Equal(before, after) {
		t.Fatal("round trip changed the encoding")
	}
	if what != "write" {
		return
	}
	total := ledgerTotal(l, leaf, q)
	switch {
	case amount == 0:
		if total != total0 {
			t.Fatalf("zero write changed the total from %d to %d", total0, total)
		}
	case l.dropped == dropped0+1:
		if l.droppedSeconds != droppedSec0+amount || total != total0 {
			t.Fatalf("dropped write of %d: dropped seconds %d -> %d, total %d -> %d", amount, droppedSec0, l.droppedSeconds, total0, total)
		}
	case total != total0+amount-pushedOut:
		t.Fatalf("write of %d at %d: total %d -> %d, want %d (%d pushed out)", amount, at.Unix(), total0, total, total0+amount-pushedOut, pushedOut)
	}
}
