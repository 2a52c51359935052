package budgets

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestWriteSpansAllOrNothing: a batch whose spans each fit but together
// overflow a bucket writes nothing; one that fits writes what the same
// spans written one by one would.
func TestWriteSpansAllOrNothing(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	mustWrite(t, l.ChargeSpan("root/a", t0, t0.Add(90*time.Second), 2))
	before, _ := l.MarshalBinary()
	big := int64(maxBucketValue/60 - 10) // one minute of it nearly fills a bucket
	spans := []Span{
		{Leaf: "root/b", Start: t0, End: t0.Add(time.Hour), GPUs: 3},
		{Leaf: "root/a", Start: t0.Add(time.Minute), End: t0.Add(2 * time.Minute), GPUs: big},
		{Leaf: "root/a", Start: t0.Add(time.Minute), End: t0.Add(2 * time.Minute), GPUs: big},
	}
	for _, sp := range spans[1:] {
		if !l.series(sp.Leaf, false).canAdd(l.bucketAt(sp.Start), big*60, l.nb) {
			t.Fatal("each span alone must fit")
		}
	}
	if err := l.WriteSpans(spans); !errors.Is(err, ErrBucketOverflow) {
		t.Fatalf("WriteSpans = %v, want ErrBucketOverflow", err)
	}
	if after, _ := l.MarshalBinary(); !bytes.Equal(before, after) {
		t.Fatal("a refused batch changed the ledger")
	}
	one := NewLedger(LedgerConfig{})
	mustWrite(t, one.ChargeSpan("root/a", t0, t0.Add(90*time.Second), 2))
	for _, sp := range spans[:2] {
		mustWrite(t, one.ChargeSpan(sp.Leaf, sp.Start, sp.End, sp.GPUs))
	}
	mustWrite(t, l.WriteSpans(spans[:2]))
	a, _ := l.MarshalBinary()
	b, _ := one.MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Fatal("a batch and the same spans one by one differ")
	}
	if got := l.Usage("root/b", t0, t0.Add(time.Hour)); got != 3*3600 {
		t.Fatalf("root/b usage %d, want %d", got, 3*3600)
	}
}

// TestRewindUndoesAdvanceOnly: Rewind puts the newest bucket and the
// horizon back after Advance calls, and refuses once anything was written.
func TestRewindUndoesAdvanceOnly(t *testing.T) {
	l := NewLedger(LedgerConfig{MaxAdvance: time.Hour, Retention: 2 * time.Hour})
	mustWrite(t, l.charge("root/a", t0, 60))
	before, _ := l.MarshalBinary()
	m := l.Mark()
	mustWrite(t, l.Advance(t0.Add(time.Hour)))
	mustWrite(t, l.Advance(t0.Add(2*time.Hour)))
	if h, _ := l.Horizon(); !h.After(t0) {
		t.Fatalf("horizon %v: the advances should have moved it past %v", h, t0)
	}
	mustWrite(t, l.Rewind(m))
	if after, _ := l.MarshalBinary(); !bytes.Equal(before, after) {
		t.Fatal("Rewind did not restore the ledger")
	}
	if got := l.Usage("root/a", t0, t0.Add(time.Minute)); got != 60 {
		t.Fatalf("usage after Rewind %d, want 60", got)
	}
	m = l.Mark()
	mustWrite(t, l.charge("root/a", t0.Add(time.Minute), 1))
	if err := l.Rewind(m); !errors.Is(err, ErrRewind) {
		t.Fatalf("Rewind after a write = %v, want ErrRewind", err)
	}
}

// TestWriteSpansMatchesOneByOne: on random batches, some naming a leaf's
// series more than once (WriteSpans sums only those per bucket), some
// near a bucket's bound, some not on whole seconds, a batch writes what the same spans written one by
// one would, and refuses (changing nothing) exactly when one of those
// writes would be refused.
func TestWriteSpansMatchesOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 34))
	leaves := []string{"root/a", "root/b", "root/c", "root/a/x"}
	cfg := LedgerConfig{Retention: time.Hour} // the spans lie within 20 minutes; a short ring keeps the test quick
	for iter := 0; iter < 1000; iter++ {
		l := NewLedger(cfg)
		mustWrite(t, l.ChargeSpan("root/a", t0, t0.Add(90*time.Second), 2))
		base, _ := l.MarshalBinary()
		spans := make([]Span, rng.IntN(8))
		for k := range spans {
			start := t0.Add(time.Duration(rng.IntN(600)) * time.Second)
			if rng.IntN(4) == 0 {
				start = start.Add(time.Duration(rng.IntN(int(time.Second)))) // not on a whole second
			}
			gpus := int64(rng.IntN(9))
			if rng.IntN(4) == 0 {
				gpus = int64(maxBucketValue/60 - 1000 + rng.IntN(2000)) // about a full bucket per minute
			}
			spans[k] = Span{Leaf: leaves[rng.IntN(len(leaves))], Start: start,
				End: start.Add(time.Duration(1+rng.IntN(300)) * time.Second), GPUs: gpus, Demand: rng.IntN(3) == 0}
		}
		one := NewLedger(cfg)
		if err := one.UnmarshalBinary(base); err != nil {
			t.Fatal(err)
		}
		var oneErr error
		for _, sp := range spans {
			if oneErr = one.WriteSpans([]Span{sp}); oneErr != nil {
				break
			}
		}
		err := l.WriteSpans(spans)
		if (err == nil) != (oneErr == nil) {
			t.Fatalf("batch %d %+v: WriteSpans = %v, one by one = %v", iter, spans, err, oneErr)
		}
		got, _ := l.MarshalBinary()
		want, _ := one.MarshalBinary()
		if err != nil {
			want = base
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("batch %d %+v (err %v): the ledger differs from the spans written one by one", iter, spans, err)
		}
	}
}
