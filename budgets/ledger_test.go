package budgets

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func mins(n int) time.Duration { return time.Duration(n) * time.Minute }

func mustWrite(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestLedgerWindowRuleAndOutOfOrder(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	// Late and out-of-order charges land in the bucket containing their time.
	mustWrite(t, l.charge("a", t0.Add(mins(10)+30*time.Second), 60))
	mustWrite(t, l.charge("a", t0.Add(mins(3)), 7))
	mustWrite(t, l.charge("a", t0.Add(mins(10)), 5))
	mustWrite(t, l.charge("a", t0.Add(-mins(600)), 100))
	tests := []struct {
		name     string
		from, to time.Time
		want     int64
	}{
		{"everything", t0.Add(-time.Hour * 24), t0.Add(time.Hour), 172},
		{"bucket start in window", t0.Add(mins(10)), t0.Add(mins(11)), 65},
		{"window starting mid-bucket skips it", t0.Add(mins(10) + time.Second), t0.Add(mins(20)), 0},
		{"window ending mid-bucket takes it", t0.Add(mins(9)), t0.Add(mins(10) + time.Nanosecond), 65},
		{"to is exclusive", t0, t0.Add(mins(10)), 7},
		{"empty window", t0.Add(mins(10)), t0.Add(mins(10)), 0},
		{"inverted window", t0.Add(mins(20)), t0, 0},
	}
	for _, tc := range tests {
		if got := l.Usage("a", tc.from, tc.to); got != tc.want {
			t.Errorf("%s: Usage = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := l.Usage("nobody", t0.Add(-time.Hour), t0.Add(time.Hour)); got != 0 {
		t.Errorf("unknown leaf usage = %d", got)
	}
	if got := l.Demand("a", t0.Add(-time.Hour*24), t0.Add(time.Hour)); got != 0 {
		t.Errorf("demand = %d, want 0 (only charges written)", got)
	}
}

func TestLedgerRetention(t *testing.T) {
	l := NewLedger(LedgerConfig{Bucket: time.Minute, Retention: time.Hour})
	mustWrite(t, l.charge("a", t0, 10))
	mustWrite(t, l.charge("a", t0.Add(mins(59)), 20)) // horizon is now t0: 60 buckets retained
	if got := l.Usage("a", t0, t0.Add(time.Hour)); got != 30 {
		t.Fatalf("Usage = %d, want 30", got)
	}
	mustWrite(t, l.charge("b", t0.Add(mins(60)), 1)) // another leaf moves the horizon for all
	if h, _ := l.Horizon(); !h.Equal(t0.Add(time.Minute)) {
		t.Errorf("Horizon = %v, want %v", h, t0.Add(time.Minute))
	}
	if got := l.Usage("a", t0.Add(-time.Hour), t0.Add(2*time.Hour)); got != 20 {
		t.Errorf("after horizon moved, Usage = %d, want 20", got)
	}
	mustWrite(t, l.charge("a", t0.Add(30*time.Second), 99)) // older than retention
	if l.Dropped() != 1 || l.DroppedGPUSeconds() != 99 {
		t.Errorf("Dropped = %d (%d s), want 1 (99 s)", l.Dropped(), l.DroppedGPUSeconds())
	}
	// A charge far in the future empties the ring of every leaf.
	mustWrite(t, l.charge("c", t0.Add(1000*time.Hour), 3))
	if got := l.Leaves(); !slices.Equal(got, []string{"c"}) {
		t.Errorf("Leaves = %q, want [c]", got)
	}
	mustWrite(t, l.charge("a", t0.Add(1000*time.Hour-mins(5)), 4))
	if got := l.Usage("a", t0, t0.Add(2000*time.Hour)); got != 4 {
		t.Errorf("Usage after jump = %d, want 4", got)
	}
}

func TestLedgerPrune(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	for i := range 10 {
		mustWrite(t, l.charge("a", t0.Add(mins(i)), 1))
		mustWrite(t, l.addDemand("b", t0.Add(mins(i)), 2))
	}
	l.Prune(t0.Add(mins(4) + time.Second)) // bucket 4 starts before: dropped
	if got := l.Usage("a", t0, t0.Add(time.Hour)); got != 5 {
		t.Errorf("Usage after prune = %d, want 5", got)
	}
	if got := l.Demand("b", t0, t0.Add(time.Hour)); got != 10 {
		t.Errorf("Demand after prune = %d, want 10", got)
	}
	l.Prune(t0) // never moves back
	if got := l.Usage("a", t0, t0.Add(time.Hour)); got != 5 {
		t.Errorf("Usage after backward prune = %d, want 5", got)
	}
	l.Prune(t0.Add(time.Hour))
	if got := l.Leaves(); len(got) != 0 || len(l.leaves) != 0 {
		t.Errorf("Leaves after full prune = %q (%d stored)", got, len(l.leaves))
	}
	mustWrite(t, l.charge("a", t0.Add(mins(30)), 1))
	if l.Dropped() != 1 {
		t.Errorf("write before prune point: Dropped = %d, want 1", l.Dropped())
	}
}

func TestLedgerRejectsBadAmounts(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	if err := l.charge("a", t0, -1); !errors.Is(err, ErrNegativeAmount) {
		t.Errorf("negative charge: err = %v", err)
	}
	if err := l.addDemand("a", t0, -5); !errors.Is(err, ErrNegativeAmount) {
		t.Errorf("negative demand: err = %v", err)
	}
	mustWrite(t, l.charge("a", t0, math.MaxUint32-1))
	if err := l.charge("a", t0.Add(time.Second), 2); !errors.Is(err, ErrBucketOverflow) {
		t.Errorf("overflowing charge: err = %v", err)
	}
	if err := l.charge("b", t0, math.MaxUint32+1); !errors.Is(err, ErrBucketOverflow) {
		t.Errorf("huge charge: err = %v", err)
	}
	mustWrite(t, l.charge("a", t0.Add(time.Minute), math.MaxUint32))
	if got, want := l.Usage("a", t0, t0.Add(time.Hour)), int64(2*math.MaxUint32-1); got != want {
		t.Errorf("Usage = %d, want %d", got, want)
	}
	if got := l.Leaves(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("rejected writes created leaves: %q", got)
	}
	mustWrite(t, l.charge("z", t0, 0))
	if len(l.Leaves()) != 1 {
		t.Error("zero charge created a leaf")
	}
}

func TestLedgerConfigNormalized(t *testing.T) {
	l := NewLedger(LedgerConfig{Bucket: 1500 * time.Millisecond, Retention: 10*time.Second + time.Millisecond})
	if l.Bucket() != time.Second || l.Retention() != 11*time.Second {
		t.Errorf("Bucket, Retention = %v, %v; want 1s, 11s", l.Bucket(), l.Retention())
	}
	d := NewLedger(LedgerConfig{})
	if d.Bucket() != time.Minute || d.Retention() != 14*24*time.Hour {
		t.Errorf("defaults = %v, %v", d.Bucket(), d.Retention())
	}
}

// TestLedgerMatchesReference drives random writes, prunes and queries through
// the Ledger and the naive model and compares every answer.
func TestLedgerMatchesReference(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		bucket := time.Duration(1+rng.IntN(120)) * time.Second
		retention := time.Duration(1+rng.IntN(400)) * bucket
		l := NewLedger(LedgerConfig{Bucket: bucket, Retention: retention})
		r := newRefLedger(bucket, retention)
		leaves := []string{"a", "b", "c/d"}
		now := t0.Add(time.Duration(rng.IntN(1000)-500) * time.Hour * 24 * 365 * 60)
		randTime := func() time.Time {
			return now.Add(time.Duration(rng.Int64N(int64(retention)*3)) - retention*2)
		}
		for op := range 3000 {
			switch k := rng.IntN(20); {
			case k < 12:
				leaf, at := leaves[rng.IntN(len(leaves))], randTime()
				v := rng.Int64N(1000)
				if rng.IntN(50) == 0 {
					v = -v - 1
				}
				if rng.IntN(100) == 0 {
					v = math.MaxUint32 - rng.Int64N(3)
				}
				q := rng.IntN(2)
				var err error
				if q == 0 {
					err = l.charge(leaf, at, v)
				} else {
					err = l.addDemand(leaf, at, v)
				}
				if want := r.write(leaf, at, v, q); !sameError(err, want) {
					t.Fatalf("seed %d op %d: write(%s, %d, q%d) err = %v, want %v", seed, op, leaf, v, q, err, want)
				}
			case k < 13 && rng.IntN(2) == 0:
				leaf, start := leaves[rng.IntN(len(leaves))], randTime().Truncate(time.Second)
				end := start.Add(time.Duration(rng.Int64N(int64(retention)*3/2)) / time.Second * time.Second)
				gpus := rng.Int64N(9) - 1
				q := rng.IntN(2)
				write := l.ChargeSpan
				if q == 1 {
					write = l.AddDemandSpan
				}
				err := write(leaf, start, end, gpus)
				if want := r.writeSpan(leaf, start, end, gpus, q); !sameError(err, want) {
					t.Fatalf("seed %d op %d: span(%s, %d GPUs, q%d) err = %v, want %v", seed, op, leaf, gpus, q, err, want)
				}
			case k < 13:
				now = now.Add(time.Duration(rng.Int64N(int64(retention) / 2)))
			case k < 14 && rng.IntN(4) == 0:
				at := randTime()
				l.Prune(at)
				r.prune(at)
			case k < 15:
				data, err := l.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				l = NewLedger(LedgerConfig{})
				if err := l.UnmarshalBinary(data); err != nil {
					t.Fatalf("seed %d op %d: round trip: %v", seed, op, err)
				}
			default:
				a, b := randTime(), randTime()
				if err := compareLedgers(l, r, leaves, [][2]time.Time{{a, b}, {b, a}, {a, now}}); err != nil {
					t.Fatalf("seed %d op %d: %v", seed, op, err)
				}
			}
		}
	}
}

func TestLedgerMarshalRoundTrip(t *testing.T) {
	l := NewLedger(LedgerConfig{Retention: 2 * time.Hour})
	for i := range 500 {
		mustWrite(t, l.charge("ai2/prior/olmo", t0.Add(mins(i)), 480))
		mustWrite(t, l.addDemand("ai2/prior/olmo", t0.Add(mins(i)), 960+int64(i%3)))
		if i%7 == 0 {
			mustWrite(t, l.charge("ai2/robotics", t0.Add(mins(i)), int64(i)))
		}
	}
	mustWrite(t, l.charge("ai2/robotics", t0, 1)) // dropped: too old
	data, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// 120 retained minutes of constant charges cost a few bytes, the
	// 3-periodic demand about 4 bytes a bucket.
	if len(data) > 1200 {
		t.Errorf("encoding is %d bytes, want <= 1200", len(data))
	}
	var m Ledger
	if err := m.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	again, _ := m.MarshalBinary()
	if string(again) != string(data) {
		t.Error("re-encoding differs")
	}
	if m.Dropped() != 1 || m.Bucket() != time.Minute || m.Retention() != 2*time.Hour {
		t.Errorf("header not restored: dropped %d bucket %v retention %v", m.Dropped(), m.Bucket(), m.Retention())
	}
	for _, leaf := range []string{"ai2/prior/olmo", "ai2/robotics"} {
		for _, w := range [][2]time.Time{{t0, t0.Add(10 * time.Hour)}, {t0.Add(mins(450)), t0.Add(mins(471) + 1)}} {
			if a, b := l.Usage(leaf, w[0], w[1]), m.Usage(leaf, w[0], w[1]); a != b {
				t.Errorf("%s usage %d, decoded %d", leaf, a, b)
			}
			if a, b := l.Demand(leaf, w[0], w[1]), m.Demand(leaf, w[0], w[1]); a != b {
				t.Errorf("%s demand %d, decoded %d", leaf, a, b)
			}
		}
	}
}

func TestLedgerUnmarshalRejectsCorruptInput(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	mustWrite(t, l.charge("a", t0, 10))
	mustWrite(t, l.addDemand("b", t0.Add(time.Hour), 20))
	data, _ := l.MarshalBinary()
	before, _ := l.MarshalBinary()
	for n := range len(data) {
		if err := l.UnmarshalBinary(data[:n]); !errors.Is(err, ErrCorruptLedger) {
			t.Errorf("truncated to %d bytes: err = %v", n, err)
		}
	}
	for i := range len(data) {
		bad := slices.Clone(data)
		bad[i] ^= 0x55
		var m Ledger
		_ = m.UnmarshalBinary(bad) // must not panic; may or may not decode
	}
	if after, _ := l.MarshalBinary(); string(after) != string(before) {
		t.Error("failed unmarshal changed the ledger")
	}
	if err := l.UnmarshalBinary(append(slices.Clone(data), 0)); !errors.Is(err, ErrCorruptLedger) {
		t.Errorf("trailing byte: err = %v", err)
	}
}

func TestSubtreeUsageAndUsageByLeaf(t *testing.T) {
	tr := publishedTree(t)
	l := NewLedger(LedgerConfig{})
	mustWrite(t, l.charge("ai2/prior/olmo", t0, 100))
	mustWrite(t, l.charge("ai2/prior/vision", t0.Add(time.Minute), 30))
	mustWrite(t, l.charge("ai2/robotics", t0, 7))
	mustWrite(t, l.charge("ai2/retired", t0, 1000)) // not in the tree: never counted
	from, to := t0, t0.Add(time.Hour)
	want := map[string]int64{"ai2": 137, "ai2/prior": 130, "ai2/prior/olmo": 100, "ai2/robotics": 7, "nope": 0}
	for p, w := range want {
		if got := l.SubtreeUsage(tr, p, from, to); got != w {
			t.Errorf("SubtreeUsage(%s) = %d, want %d", p, got, w)
		}
	}
	dst := make([]int64, 1, 8)
	got := l.UsageByLeaf(tr, from, to, dst)
	if !slices.Equal(got, []int64{100, 30, 7}) || &got[0] != &dst[0] {
		t.Errorf("UsageByLeaf = %v (reused %v)", got, &got[0] == &dst[0])
	}
}

// TestUsageByLeafFollowsLeaves: UsageByLeaf keeps each leaf's series from
// one call to the next; a leaf charged for the first time, a prune that
// forgets a leaf, another tree and an unmarshalled ledger must all be seen.
func TestUsageByLeafFollowsLeaves(t *testing.T) {
	tr := publishedTree(t)
	l := NewLedger(LedgerConfig{})
	from, to := t0, t0.Add(time.Hour)
	check := func(l *Ledger, tr *Tree, want []int64) {
		t.Helper()
		if got := l.UsageByLeaf(tr, from, to, nil); !slices.Equal(got, want) {
			t.Errorf("UsageByLeaf = %v, want %v", got, want)
		}
	}
	check(l, tr, []int64{0, 0, 0})
	mustWrite(t, l.charge("ai2/prior/olmo", t0, 100))
	check(l, tr, []int64{100, 0, 0})
	mustWrite(t, l.charge("ai2/robotics", t0, 7))
	mustWrite(t, l.charge("ai2/prior/olmo", t0, 1))
	check(l, tr, []int64{101, 0, 7})
	mustWrite(t, l.charge("ai2/prior/vision", t0.Add(2*time.Hour), 30))
	l.Prune(t0.Add(2 * time.Hour))
	check(l, tr, []int64{0, 0, 0})
	mustWrite(t, l.charge("ai2/robotics", t0.Add(2*time.Hour), 5))
	from, to = t0.Add(2*time.Hour), t0.Add(3*time.Hour)
	check(l, tr, []int64{0, 30, 5})
	other, err := NewTree([]Spec{{Path: "ai2"}, {Path: "ai2/robotics", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	check(l, other, []int64{5})
	data, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Ledger
	if err := back.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	check(&back, tr, []int64{0, 30, 5})
	mustWrite(t, back.charge("ai2/prior/olmo", t0.Add(2*time.Hour), 9))
	check(&back, tr, []int64{9, 30, 5})
}

func TestLedgerSpans(t *testing.T) {
	l := NewLedger(LedgerConfig{Bucket: time.Second, Retention: time.Hour})
	// 3 GPUs over [0.5 s, 2.5 s): 6 GPU-seconds, split 1, 3, 2 by the
	// cumulative floor so none is lost.
	mustWrite(t, l.ChargeSpan("a", t0.Add(500*time.Millisecond), t0.Add(2500*time.Millisecond), 3))
	for i, want := range []int64{1, 3, 2} {
		at := t0.Add(time.Duration(i) * time.Second)
		if got := l.Usage("a", at, at.Add(time.Second)); got != want {
			t.Errorf("bucket %d = %d, want %d", i, got, want)
		}
	}
	// A 3-hour span on a 1-hour ledger keeps its last hour, drops nothing.
	mustWrite(t, l.AddDemandSpan("b", t0.Add(time.Hour), t0.Add(4*time.Hour), 2))
	if got := l.Demand("b", t0, t0.Add(5*time.Hour)); got != 2*3600 || l.Dropped() != 0 {
		t.Errorf("long span demand = %d (dropped %d), want 7200 (0)", got, l.Dropped())
	}
	// Now the horizon is t0+3h: a span across it loses the part before.
	mustWrite(t, l.ChargeSpan("a", t0.Add(3*time.Hour-10*time.Second), t0.Add(3*time.Hour+5*time.Second), 4))
	if l.Dropped() != 1 || l.DroppedGPUSeconds() != 40 || l.Usage("a", t0, t0.Add(5*time.Hour)) != 20 {
		t.Errorf("dropped %d (%d s), usage %d; want 1 (40 s), 20", l.Dropped(), l.DroppedGPUSeconds(), l.Usage("a", t0, t0.Add(5*time.Hour)))
	}
	if err := l.ChargeSpan("a", t0, t0.Add(time.Hour), -1); !errors.Is(err, ErrNegativeAmount) {
		t.Errorf("negative GPUs: err = %v", err)
	}
	if err := l.ChargeSpan("a", t0, t0.Add(100*365*24*time.Hour), math.MaxInt64/1000); !errors.Is(err, ErrSpanTooLarge) {
		t.Errorf("huge span: err = %v", err)
	}
	before := l.Usage("c", t0, t0.Add(5*time.Hour))
	mustWrite(t, l.ChargeSpan("c", t0.Add(3*time.Hour+30*time.Second), t0.Add(3*time.Hour+40*time.Second), 1<<31))
	if err := l.ChargeSpan("c", t0.Add(3*time.Hour+20*time.Second), t0.Add(3*time.Hour+35*time.Second), 1<<31); !errors.Is(err, ErrBucketOverflow) {
		t.Errorf("overflowing span: err = %v", err)
	}
	if got := l.Usage("c", t0, t0.Add(5*time.Hour)); got != before+10<<31 {
		t.Errorf("rejected span wrote: usage %d, want %d", got, before+10<<31)
	}
}
