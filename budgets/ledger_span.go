package budgets

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
)

// ErrSpanTooLarge is returned when gpus × the span's length does not fit in
// an int64 of GPU-seconds.
var ErrSpanTooLarge = errors.New("span too large")

// ChargeSpan charges gpus GPUs held over [start, end): each bucket gets the
// GPU-seconds of its overlap with the span, split so that the total is
// exactly floor(gpus × seconds(end−start)) however the span is cut (with
// whole-second times, gpus × overlap seconds per bucket).
//
// It is atomic: it returns ErrNegativeAmount, ErrBucketOverflow,
// ErrTooFarAhead (the span's last bucket is beyond MaxAdvance) or
// ErrSpanTooLarge without writing anything. The part of the span before the
// horizon (as it stands before the call) is dropped and counted as one
// dropped write; the part the span itself pushes out of retention (a span
// longer than Retention) is never stored.
func (l *Ledger) ChargeSpan(leaf string, start, end time.Time, gpus int64) error {
	return l.WriteSpans([]Span{{Leaf: leaf, Start: start, End: end, GPUs: gpus}})
}

// AddDemandSpan adds demand for gpus GPUs wanted over [start, end), with
// ChargeSpan's rules.
func (l *Ledger) AddDemandSpan(leaf string, start, end time.Time, gpus int64) error {
	return l.WriteSpans([]Span{{Leaf: leaf, Start: start, End: end, GPUs: gpus, Demand: true}})
}

// Span is one write of WriteSpans: GPUs GPUs held (or, with Demand, wanted)
// by Leaf over [Start, End).
type Span struct {
	Leaf       string
	Start, End time.Time
	GPUs       int64
	Demand     bool
}

// WriteSpans writes every span as ChargeSpan (or AddDemandSpan) would, in
// order, all or nothing: it first checks them all against the ledger as it
// stands, each bucket against the sum of what the spans add to it, and
// returns the first error without writing anything. It is the one way
// charges and demand spread over time reach a ledger.
func (l *Ledger) WriteSpans(spans []Span) error {
	// Spans of different (leaf, series) pairs never share a bucket, so
	// only the buckets of a pair named by several spans need a batch sum:
	// shared marks those spans (the common batch, one span per leaf, has
	// none and needs no sums at all).
	shared := l.sharedSpans(spans)
	var sums map[spanBucket]int64
	if shared != nil {
		if l.spanSums == nil {
			l.spanSums = map[spanBucket]int64{}
		}
		sums = l.spanSums
		clear(sums) // reused: a batch's sums, kept between calls only to save the allocation
	}
	planned := l.spanPlans[:0]
	same := -1 // the last span planned with buckets: the common batch charges every leaf over one interval
	for i := range spans {
		sp := &spans[i]
		planned = append(planned, spanWrite{})
		w := &planned[i]
		var prev *spanWrite
		if same >= 0 {
			prev = &planned[same]
		}
		if err := l.planSpan(sp, w, prev); err != nil {
			return err
		}
		if w.empty() {
			continue
		}
		same = i
		w.ls = l.leaves[sp.Leaf]
		s := w.ls.pick(sp.Demand)
		for j := w.keepFrom; j <= w.last; j++ {
			v := w.amount(j)
			if shared != nil && shared[i] {
				k := spanBucket{sp.Leaf, sp.Demand, j}
				sums[k] += v
				v = sums[k]
			}
			if !s.canAdd(j, v, l.nb) {
				return fmt.Errorf("%w: %s of %d GPUs over [%s, %s) for %q: a leaf's bucket holds at most %d GPU-seconds",
					ErrBucketOverflow, sp.what(), sp.GPUs, sp.Start.UTC().Format(time.RFC3339), sp.End.UTC().Format(time.RFC3339), sp.Leaf, int64(maxBucketValue))
			}
		}
	}
	// Writing in order only moves the newest bucket (and the horizon)
	// forward: a later span then drops more and checks its bound against a
	// later bucket, so nothing checked above can fail now.
	for i := range spans {
		w := &planned[i]
		if !w.empty() {
			w.keepFrom = l.keepFrom(w) // the horizon may have moved since
		}
		l.writePlanned(&spans[i], w)
	}
	l.spanPlans = planned
	return nil
}

// sharedSpans marks the spans whose (leaf, series) pair another span of
// the batch names too; nil when no pair repeats. It sorts the spans'
// indexes by pair in a scratch slice kept between calls.
func (l *Ledger) sharedSpans(spans []Span) []bool {
	if len(spans) < 2 {
		return nil
	}
	sorted := true // then no pair repeats unless two neighbours share it
	for k := 1; k < len(spans) && sorted; k++ {
		sorted = compareSpanPairs(&spans[k-1], &spans[k]) < 0
	}
	if sorted {
		return nil
	}
	ord := l.spanOrder[:0]
	for i := range spans {
		ord = append(ord, int32(i))
	}
	l.spanOrder = ord
	pair := func(a, b int32) int { return compareSpanPairs(&spans[a], &spans[b]) }
	slices.SortFunc(ord, pair)
	var shared []bool
	for k := 1; k < len(ord); k++ {
		if pair(ord[k-1], ord[k]) != 0 {
			continue
		}
		if shared == nil {
			l.spanShared = slices.Grow(l.spanShared[:0], len(spans))[:len(spans)]
			clear(l.spanShared)
			shared = l.spanShared
		}
		shared[ord[k-1]], shared[ord[k]] = true, true
	}
	return shared
}

// compareSpanPairs orders spans by leaf, then charge before demand.
func compareSpanPairs(a, b *Span) int {
	if c := strings.Compare(a.Leaf, b.Leaf); c != 0 {
		return c
	}
	switch {
	case a.Demand == b.Demand:
		return 0
	case b.Demand:
		return -1
	}
	return 1
}

// spanBucket names one bucket of one leaf's charge or demand series, for
// WriteSpans' sum of a batch's spans per bucket.
type spanBucket struct {
	leaf   string
	demand bool
	j      int64
}

func (sp *Span) what() string {
	if sp.Demand {
		return "demand"
	}
	return "charge"
}

// spanSplit computes the cumulative GPU-seconds of a span up to a time.
type spanSplit struct {
	start time.Time
	gpus  uint64
	// whole: the span starts and ends on whole seconds, as bucket starts
	// do, so every x upTo is asked for is a whole number of seconds after
	// start and the product needs no division.
	whole bool
}

// upTo returns floor(gpus × seconds(x−start)) for x in [start, end].
func (p spanSplit) upTo(x time.Time) int64 {
	if p.whole {
		return int64(p.gpus) * (x.Unix() - p.start.Unix()) // fitsGPUSeconds held for the whole span
	}
	hi, lo := bits.Mul64(p.gpus, uint64(x.Sub(p.start)))
	q, _ := bits.Div64(hi, lo, uint64(time.Second)) // fitsGPUSeconds held for the whole span
	return int64(q)
}

// spanWrite is a checked span's buckets, as the ledger stands.
type spanWrite struct {
	split       spanSplit
	start, end  time.Time
	first, last int64
	keepFrom    int64
	bucketSec   int64
	nothing     bool
	// ls is the leaf's entry when WriteSpans checked the span, nil when it
	// had none.
	ls *leafSeries
	// startSec and endSec are start and end in Unix seconds when the
	// span is whole (split.whole): amount then needs no time arithmetic.
	startSec, endSec int64
}

func (w *spanWrite) empty() bool { return w.nothing }

func (w *spanWrite) clip(t time.Time) time.Time {
	if t.Before(w.start) {
		return w.start
	}
	if t.After(w.end) {
		return w.end
	}
	return t
}

func (w *spanWrite) bucketStart(j int64) time.Time { return time.Unix(j*w.bucketSec, 0) }

// amount is what the span adds to bucket j.
func (w *spanWrite) amount(j int64) int64 {
	if w.split.whole {
		// upTo(clip(bucketStart(j+1))) - upTo(clip(bucketStart(j))) in
		// whole seconds: bucket starts are whole seconds too.
		lo := min(max(j*w.bucketSec, w.startSec), w.endSec)
		hi := min(max((j+1)*w.bucketSec, w.startSec), w.endSec)
		return int64(w.split.gpus) * (hi - lo)
	}
	return w.split.upTo(w.clip(w.bucketStart(j+1))) - w.split.upTo(w.clip(w.bucketStart(j)))
}

// planSpan checks a span's amount and bound and finds its buckets, written
// into *w in place (the record is large); *w means nothing on an error.
// prev, when not nil, is a span of the batch planned before it with
// buckets: when it covers the same interval, its buckets are the span's
// (planning writes nothing, so the ledger has not moved since).
func (l *Ledger) planSpan(sp *Span, w *spanWrite, prev *spanWrite) error {
	if sp.GPUs < 0 {
		return fmt.Errorf("%w: %s span of %d GPUs for %q: GPUs must be >= 0", ErrNegativeAmount, sp.what(), sp.GPUs, sp.Leaf)
	}
	if sp.GPUs == 0 || !sp.Start.Before(sp.End) {
		*w = spanWrite{nothing: true}
		return nil
	}
	if d := sp.End.Sub(sp.Start); d == math.MaxInt64 || !fitsGPUSeconds(uint64(sp.GPUs), uint64(d)) {
		return fmt.Errorf("%w: %s of %d GPUs over %v for %q: GPU-seconds must fit in an int64", ErrSpanTooLarge, sp.what(), sp.GPUs, d, sp.Leaf)
	}
	if prev != nil && prev.start == sp.Start && prev.end == sp.End {
		*w = *prev // the same times (==: the same instant, location and all), so the same buckets
		w.split.gpus = uint64(sp.GPUs)
		return nil
	}
	*w = spanWrite{split: spanSplit{start: sp.Start, gpus: uint64(sp.GPUs), whole: sp.Start.Nanosecond() == 0 && sp.End.Nanosecond() == 0}, start: sp.Start, end: sp.End,
		first: l.bucketAt(sp.Start), last: l.bucketAt(sp.End.Add(-1)), bucketSec: l.bucketSec}
	if l.tooFarAhead(w.last) {
		return l.checkAhead(w.last, sp.what()+" span", sp.Leaf)
	}
	if w.split.whole {
		w.startSec, w.endSec = sp.Start.Unix(), sp.End.Unix()
	}
	w.keepFrom = l.keepFrom(w)
	return nil
}

// keepFrom is the first bucket of w the ledger keeps as it stands.
func (l *Ledger) keepFrom(w *spanWrite) int64 { return max(w.first, l.floor, w.last-l.span+1) }

// writePlanned writes a checked span.
func (l *Ledger) writePlanned(sp *Span, w *spanWrite) {
	if w.nothing {
		return
	}
	if w.first < l.floor {
		if lost := w.split.upTo(w.clip(w.bucketStart(l.floor))); lost > 0 {
			l.dropped++
			l.changes++
			l.droppedSeconds += lost
		}
	}
	ls := w.ls
	if ls == nil {
		ls = l.leaves[sp.Leaf] // an earlier span of the batch may have made it
	}
	for j := w.keepFrom; j <= w.last; j++ {
		if v := w.amount(j); v > 0 {
			ls = l.writeSeries(sp.Leaf, ls, j, v, sp.Demand)
		}
	}
}

// fitsGPUSeconds reports whether gpus × d nanoseconds, in whole seconds, fits
// in an int64.
func fitsGPUSeconds(gpus, d uint64) bool {
	hi, lo := bits.Mul64(gpus, d)
	if hi >= uint64(time.Second) {
		return false
	}
	q, _ := bits.Div64(hi, lo, uint64(time.Second))
	return q <= math.MaxInt64
}
