package budgets

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Ledger defaults: docs/design.md asks for 1-minute buckets kept for at least
// twice the 7-day lookback window.
const (
	DefaultBucket    = time.Minute
	DefaultRetention = 14 * 24 * time.Hour
)

// maxRetentionBuckets bounds the ring of one series (16 MiB of buckets), so
// that a misconfigured or corrupt ledger cannot ask for unbounded memory.
const maxRetentionBuckets = 1 << 22

// secondsLimit keeps bucket indexes, and bucket index × bucket length,
// far from int64 overflow whatever the time: bucket indexes are clamped to
// ±secondsLimit / bucket seconds (about ±36 billion years).
const secondsLimit = 1 << 60

var (
	// ErrNegativeAmount is returned for a negative charge or demand.
	ErrNegativeAmount = errors.New("negative GPU-seconds")
	// ErrBucketOverflow is returned when a charge or demand would take one
	// leaf's bucket above 4,294,967,295 GPU-seconds.
	ErrBucketOverflow = errors.New("bucket overflow")
	// ErrTooFarAhead is returned when a write or Advance would move the
	// ledger's newest bucket, and with it the horizon, further than the
	// ledger's MaxAdvance in one step.
	ErrTooFarAhead = errors.New("too far ahead of the ledger's newest bucket")
)

// LedgerConfig sizes a Ledger. Zero values take the defaults.
type LedgerConfig struct {
	// Bucket is the time resolution; it is rounded down to whole seconds
	// (at least one). Default 1 minute.
	Bucket time.Duration
	// Retention is how far behind the newest bucket data is kept; it is
	// rounded up to whole buckets, at most 4,194,304 buckets. Default 14 days.
	Retention time.Duration
	// MaxAdvance, when > 0, bounds how far one write (or Advance) may move
	// the newest bucket forward, rounded up to whole buckets: a write to a
	// bucket more than that after the newest one is refused with
	// ErrTooFarAhead and changes nothing. The horizon follows the newest
	// bucket, so no single call can then push out more than MaxAdvance of
	// history: a timestamp from a wrong clock costs an error, not the ledger.
	// The first write to a ledger never written (nothing to lose) is not
	// bounded. Zero: no bound (the simulator's clock is trusted).
	MaxAdvance time.Duration
}

// Ledger records, per leaf path and per time bucket, the GPU-seconds charged
// to the leaf and the GPU-seconds its running + pending allocated work
// wanted (demand).
//
// It is keyed by path, not by a tree's leaf index, so that usage survives a
// re-applied budget tree. Amounts are whole GPU-seconds. A bucket belongs to
// a window [from, to) when the bucket's start lies in the window.
//
// Retention follows the newest bucket ever written: buckets older than
// Retention behind it, and buckets before the last Prune point, are gone,
// and writes to them are dropped and counted (see Dropped). A write far in
// the future therefore moves the horizon forward for every leaf; callers
// choose timestamps (the raft leader does, before Apply), and MaxAdvance
// bounds what one wrong timestamp can push out.
//
// Window sums cost O(1) per leaf: two block prefixes and at most 8 bucket
// reads at each end, whatever the window length. A write at the newest
// block is O(1); a late write is O(blocks after it) (≤ 1,261 additions with
// the defaults). Make one with NewLedger or UnmarshalBinary; the zero Ledger
// is not ready for use. A Ledger is not safe for concurrent use.
type Ledger struct {
	bucketSec int64
	limit     int64 // bucketLimit, fixed with bucketSec (a division saved on every write)
	span      int64 // retention in buckets
	nb        int64 // blocks per series ring: enough to hold span buckets at any alignment
	head      int64 // newest bucket written (valid when written)
	floor     int64 // oldest retained bucket
	written   bool
	maxAhead  int64 // MaxAdvance in buckets; 0: unbounded
	leaves    map[string]*leafSeries
	// leavesGen counts the entries added to or deleted from leaves, so
	// that byLeaf knows when it is stale.
	leavesGen uint64
	byLeaf    leafCache

	dropped        int64
	droppedSeconds int64
	// changes counts the writes and prunes, so that Rewind knows whether
	// only Advance moved the ledger since a Mark.
	changes uint64
	// spanSums is WriteSpans' scratch (cleared at each call): a ledger is
	// written by one goroutine at a time, as every write mutates it.
	spanSums map[spanBucket]int64
	// spanOrder, spanShared and spanPlans are WriteSpans' scratch too.
	spanOrder  []int32
	spanShared []bool
	spanPlans  []spanWrite
}

type leafSeries struct {
	charged, demand series
}

// leafCache is, for the tree UsageByLeaf last read, each leaf's series by
// leaf index (nil while the leaf has none), valid while the ledger's
// leavesGen is gen: UsageByLeaf runs at every decision, and looking each
// leaf's path up in the map was most of its cost.
type leafCache struct {
	tree   *Tree
	gen    uint64
	series []*leafSeries
}

// NewLedger returns an empty ledger. Out-of-range settings are normalized as
// documented on LedgerConfig; it never fails.
func NewLedger(cfg LedgerConfig) *Ledger {
	bucket := cfg.Bucket
	if bucket <= 0 {
		bucket = DefaultBucket
	}
	bs := max(int64(bucket/time.Second), 1)
	ret := cfg.Retention
	if ret <= 0 {
		ret = DefaultRetention
	}
	rs := int64(ret / time.Second)
	if ret%time.Second != 0 {
		rs++
	}
	span := min(max((rs+bs-1)/bs, 1), maxRetentionBuckets)
	l := newLedger(bs, span)
	l.SetMaxAdvance(cfg.MaxAdvance)
	return l
}

// SetMaxAdvance sets the ledger's MaxAdvance (see LedgerConfig; <= 0: no
// bound). It is configuration, not state: MarshalBinary does not keep it,
// so whoever restores a ledger sets it again.
func (l *Ledger) SetMaxAdvance(d time.Duration) {
	l.maxAhead = 0
	if d > 0 {
		s := int64(d / time.Second)
		if d%time.Second != 0 {
			s++
		}
		l.maxAhead = max((s+l.bucketSec-1)/l.bucketSec, 1)
	}
}

// MaxAdvance returns the bound SetMaxAdvance set, in whole buckets (0: none).
func (l *Ledger) MaxAdvance() time.Duration {
	return time.Duration(l.maxAhead*l.bucketSec) * time.Second
}

func newLedger(bucketSec, span int64) *Ledger {
	l := &Ledger{
		bucketSec: bucketSec,
		span:      span,
		nb:        (span+blockLen-1)/blockLen + 1,
		floor:     math.MinInt64,
		leaves:    make(map[string]*leafSeries),
	}
	if bucketSec > 0 { // else a corrupt encoding's, which UnmarshalBinary refuses
		l.limit = secondsLimit / bucketSec
	}
	return l
}

// Bucket returns the ledger's bucket length.
func (l *Ledger) Bucket() time.Duration { return time.Duration(l.bucketSec) * time.Second }

// Retention returns how much history the ledger keeps, in whole buckets.
func (l *Ledger) Retention() time.Duration { return time.Duration(l.span*l.bucketSec) * time.Second }

// Horizon returns the start of the oldest retained bucket, and false while
// nothing has been written or pruned.
func (l *Ledger) Horizon() (time.Time, bool) {
	if l.floor == math.MinInt64 {
		return time.Time{}, false
	}
	return time.Unix(l.floor*l.bucketSec, 0).UTC(), true
}

// Head returns the start of the newest bucket written (or advanced to), and
// false while nothing has been.
func (l *Ledger) Head() (time.Time, bool) {
	if !l.written {
		return time.Time{}, false
	}
	return time.Unix(l.head*l.bucketSec, 0).UTC(), true
}

// Advance moves the newest bucket to the one containing to, and the horizon
// with it, as a write there would, without writing anything: the way to say
// that time has passed when nothing was charged meanwhile. An earlier to
// changes nothing. MaxAdvance bounds it as it bounds writes.
func (l *Ledger) Advance(to time.Time) error {
	j := l.bucketAt(to)
	if err := l.checkAhead(j, "advance", ""); err != nil {
		return err
	}
	l.moveHead(j)
	return nil
}

// HeadMark is where a ledger's newest bucket and horizon stood at Mark.
type HeadMark struct {
	head, floor int64
	written     bool
	changes     uint64
}

// Mark returns where the newest bucket and the horizon stand, for Rewind.
func (l *Ledger) Mark() HeadMark {
	return HeadMark{head: l.head, floor: l.floor, written: l.written, changes: l.changes}
}

// ErrRewind is returned by Rewind when the ledger was written or pruned
// since the Mark.
var ErrRewind = errors.New("the ledger was written since the mark")

// Rewind undoes the Advance calls made since m was taken: the newest bucket
// and the horizon move back to where they stood. Advance moves nothing
// else, so this restores the ledger exactly; it refuses, changing nothing,
// when anything was written or pruned since.
func (l *Ledger) Rewind(m HeadMark) error {
	if l.changes != m.changes {
		return ErrRewind
	}
	l.head, l.floor, l.written = m.head, m.floor, m.written
	return nil
}

// checkAhead returns ErrTooFarAhead when bucket j lies more than MaxAdvance
// after the newest bucket.
func (l *Ledger) checkAhead(j int64, what, leaf string) error {
	if !l.tooFarAhead(j) {
		return nil
	}
	return fmt.Errorf("%w: %s for %q at %s, %s after the newest bucket (%s); one write may move it at most %s",
		ErrTooFarAhead, what, leaf, time.Unix(j*l.bucketSec, 0).UTC().Format(time.RFC3339),
		time.Duration(min(j-l.head, math.MaxInt64/int64(time.Second)/l.bucketSec)*l.bucketSec)*time.Second,
		time.Unix(l.head*l.bucketSec, 0).UTC().Format(time.RFC3339), l.MaxAdvance())
}

// tooFarAhead reports whether bucket j lies more than MaxAdvance after the
// newest bucket.
func (l *Ledger) tooFarAhead(j int64) bool {
	return l.maxAhead != 0 && l.written && j > l.head+l.maxAhead
}

// moveHead makes j the newest bucket if it is later, moving the horizon.
func (l *Ledger) moveHead(j int64) {
	if !l.written || j > l.head {
		l.head, l.written = j, true
		l.floor = max(l.floor, j-l.span+1, -l.bucketLimit())
	}
}

// Dropped returns how many writes (charge or addDemand calls, or span parts, with a positive
// amount) were dropped because their bucket was older than the horizon.
func (l *Ledger) Dropped() int64 { return l.dropped }

// DroppedGPUSeconds returns the GPU-seconds of the dropped writes.
func (l *Ledger) DroppedGPUSeconds() int64 { return l.droppedSeconds }

// charge adds gpuSeconds of charged use to leaf's bucket containing at (the
// tests' way to set up a ledger: every caller outside this package writes
// spans, with WriteSpans, ChargeSpan or AddDemandSpan). A
// write older than the horizon is dropped and counted, and returns nil. It
// returns ErrNegativeAmount for gpuSeconds < 0, ErrTooFarAhead beyond
// MaxAdvance, and ErrBucketOverflow if the bucket would exceed
// 4,294,967,295 GPU-seconds; the ledger is then unchanged.
func (l *Ledger) charge(leaf string, at time.Time, gpuSeconds int64) error {
	return l.write(leaf, at, gpuSeconds, false)
}

// addDemand adds gpuSeconds of demand (GPUs of the leaf's running + pending
// allocated work × seconds) to leaf's bucket containing at, with charge's rules.
func (l *Ledger) addDemand(leaf string, at time.Time, gpuSeconds int64) error {
	return l.write(leaf, at, gpuSeconds, true)
}

func (l *Ledger) write(leaf string, at time.Time, v int64, demand bool) error {
	what := "charge"
	if demand {
		what = "demand"
	}
	if v < 0 {
		return fmt.Errorf("%w: %s of %d for %q: amounts must be >= 0", ErrNegativeAmount, what, v, leaf)
	}
	if v == 0 {
		return nil
	}
	j := l.bucketAt(at)
	if err := l.checkAhead(j, what, leaf); err != nil {
		return err
	}
	if j < l.floor {
		l.dropped++
		l.changes++
		l.droppedSeconds += v
		return nil
	}
	ls := l.leaves[leaf]
	if v > maxBucketValue || !ls.pick(demand).canAdd(j, v, l.nb) {
		return fmt.Errorf("%w: %s of %d GPU-seconds for %q at %s: a leaf's bucket holds at most %d",
			ErrBucketOverflow, what, v, leaf, at.UTC().Format(time.RFC3339), int64(maxBucketValue))
	}
	l.writeSeries(leaf, ls, j, v, demand)
	return nil
}

// pick returns ls's charged or demand series, nil for a nil ls.
func (ls *leafSeries) pick(demand bool) *series {
	switch {
	case ls == nil:
		return nil
	case demand:
		return &ls.demand
	}
	return &ls.charged
}

// series returns leaf's charged or demand series for reading, nil if the
// leaf has none (a nil series reads as all zeros).
func (l *Ledger) series(leaf string, demand bool) *series {
	return l.leaves[leaf].pick(demand)
}

// writeSeries adds v > 0 to bucket j >= floor of leaf, which has room for
// it; ls is leaf's entry, nil when it has none (then made). It returns the
// entry.
func (l *Ledger) writeSeries(leaf string, ls *leafSeries, j, v int64, demand bool) *leafSeries {
	if ls == nil {
		ls = &leafSeries{}
		l.leaves[leaf] = ls
		l.leavesGen++
	}
	l.moveHead(j)
	ls.pick(demand).add(j, v, l.nb)
	l.changes++
	return ls
}

// Usage returns leaf's charged GPU-seconds in buckets starting in [from, to).
func (l *Ledger) Usage(leaf string, from, to time.Time) int64 {
	a, b := l.window(from, to)
	return l.sumBuckets(leaf, a, b, false)
}

// Demand returns leaf's demand GPU-seconds in buckets starting in [from, to).
func (l *Ledger) Demand(leaf string, from, to time.Time) int64 {
	a, b := l.window(from, to)
	return l.sumBuckets(leaf, a, b, true)
}

func (l *Ledger) sumBuckets(leaf string, a, b int64, demand bool) int64 {
	ls := l.leaves[leaf]
	if ls == nil || a >= b {
		return 0
	}
	if demand {
		return ls.demand.sum(a, b, l.nb)
	}
	return ls.charged.sum(a, b, l.nb)
}

// SubtreeUsage returns the charged GPU-seconds in [from, to) of the leaves of
// t under path (path itself if it is a leaf), 0 if t has no such node. Ledger
// entries for paths that are not leaves of t (removed budgets, former leaves)
// do not count, as in ComputeFairShare.
func (l *Ledger) SubtreeUsage(t *Tree, path string, from, to time.Time) int64 {
	n, ok := t.Lookup(path)
	if !ok {
		return 0
	}
	first, last := n, n
	for !first.IsLeaf() {
		first = first.Children[0]
	}
	for !last.IsLeaf() {
		last = last.Children[len(last.Children)-1]
	}
	a, b := l.window(from, to)
	var sum int64
	for _, leaf := range t.Leaves()[first.LeafIndex : last.LeafIndex+1] {
		sum += l.sumBuckets(leaf.Path, a, b, false)
	}
	return sum
}

// UsageByLeaf returns every leaf's charged GPU-seconds in [from, to), indexed
// by Node.LeafIndex, reusing dst's storage when it is large enough.
func (l *Ledger) UsageByLeaf(t *Tree, from, to time.Time, dst []int64) []int64 {
	leaves := t.Leaves()
	dst = slices.Grow(dst[:0], len(leaves))[:len(leaves)]
	a, b := l.window(from, to)
	c := &l.byLeaf
	if c.tree != t || c.gen != l.leavesGen || len(c.series) != len(leaves) {
		c.tree, c.gen = t, l.leavesGen
		c.series = slices.Grow(c.series[:0], len(leaves))[:len(leaves)]
		for i, leaf := range leaves {
			c.series[i] = l.leaves[leaf.Path]
		}
	}
	for i, ls := range c.series {
		dst[i] = 0
		if ls != nil && a < b {
			dst[i] = ls.charged.sum(a, b, l.nb)
		}
	}
	return dst
}

// Prune drops every bucket that starts before `before`, and forgets leaves
// left with nothing; later writes there are dropped. It never moves the
// horizon back.
func (l *Ledger) Prune(before time.Time) {
	l.changes++
	l.floor = max(l.floor, l.firstBucketFrom(before))
	n := len(l.leaves)
	maps.DeleteFunc(l.leaves, func(_ string, ls *leafSeries) bool { return !l.retained(ls) })
	l.leavesGen += uint64(n - len(l.leaves))
}

func (l *Ledger) retained(ls *leafSeries) bool {
	return !ls.charged.empty() && ls.charged.last >= l.floor || !ls.demand.empty() && ls.demand.last >= l.floor
}

// Leaves returns, sorted, the paths with a charge or demand at or after the horizon.
func (l *Ledger) Leaves() []string {
	out := make([]string, 0, len(l.leaves))
	for p, ls := range l.leaves {
		if l.retained(ls) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// SizeBytes returns the memory held by the ledger's bucket arrays (not
// counting map and path overhead, which is small beside them).
func (l *Ledger) SizeBytes() int64 {
	var n int64
	for _, ls := range l.leaves {
		n += ls.charged.sizeBytes() + ls.demand.sizeBytes()
	}
	return n
}

// bucketAt returns the index of the bucket containing at. Times beyond the
// limit land in the last bucket before it, which a window reaching the limit
// still reads.
func (l *Ledger) bucketAt(at time.Time) int64 {
	return min(l.clampBucket(floorDiv(at.Unix(), l.bucketSec)), l.bucketLimit()-1)
}

// firstBucketFrom returns the index of the first bucket starting at or after t.
func (l *Ledger) firstBucketFrom(t time.Time) int64 {
	s := t.Unix()
	q := floorDiv(s, l.bucketSec)
	if floorMod(s, l.bucketSec) != 0 || t.Nanosecond() != 0 {
		q++
	}
	return l.clampBucket(q)
}

// window returns the bucket range [a, b) of buckets starting in [from, to),
// limited to retained buckets.
func (l *Ledger) window(from, to time.Time) (a, b int64) {
	a = max(l.firstBucketFrom(from), l.floor)
	b = l.firstBucketFrom(to)
	return a, b
}

// bucketLimit is the largest bucket index: its start in seconds stays
// below secondsLimit.
func (l *Ledger) bucketLimit() int64 { return l.limit }

func (l *Ledger) clampBucket(j int64) int64 {
	lim := l.bucketLimit()
	return min(max(j, -lim), lim)
}
