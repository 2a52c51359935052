package budgets

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
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
	return l.writeSpan(leaf, start, end, gpus, false)
}

// AddDemandSpan adds demand for gpus GPUs wanted over [start, end), with
// ChargeSpan's rules.
func (l *Ledger) AddDemandSpan(leaf string, start, end time.Time, gpus int64) error {
	return l.writeSpan(leaf, start, end, gpus, true)
}

// spanSplit computes the cumulative GPU-seconds of a span up to a time.
type spanSplit struct {
	start time.Time
	gpus  uint64
}

// upTo returns floor(gpus × seconds(x−start)) for x in [start, end].
func (p spanSplit) upTo(x time.Time) int64 {
	hi, lo := bits.Mul64(p.gpus, uint64(x.Sub(p.start)))
	q, _ := bits.Div64(hi, lo, uint64(time.Second)) // fitsGPUSeconds held for the whole span
	return int64(q)
}

func (l *Ledger) writeSpan(leaf string, start, end time.Time, gpus int64, demand bool) error {
	what := "charge"
	if demand {
		what = "demand"
	}
	if gpus < 0 {
		return fmt.Errorf("%w: %s span of %d GPUs for %q: GPUs must be >= 0", ErrNegativeAmount, what, gpus, leaf)
	}
	if gpus == 0 || !start.Before(end) {
		return nil
	}
	if d := end.Sub(start); d == math.MaxInt64 || !fitsGPUSeconds(uint64(gpus), uint64(d)) {
		return fmt.Errorf("%w: %s of %d GPUs over %v for %q: GPU-seconds must fit in an int64", ErrSpanTooLarge, what, gpus, d, leaf)
	}
	split := spanSplit{start: start, gpus: uint64(gpus)}
	first, last := l.bucketAt(start), l.bucketAt(end.Add(-1))
	if err := l.checkAhead(last, what+" span", leaf); err != nil {
		return err
	}
	keepFrom := max(first, l.floor, last-l.span+1)
	bucketStart := func(j int64) time.Time { return time.Unix(j*l.bucketSec, 0) }
	clip := func(t time.Time) time.Time {
		if t.Before(start) {
			return start
		}
		if t.After(end) {
			return end
		}
		return t
	}
	amount := func(j int64) int64 {
		return split.upTo(clip(bucketStart(j+1))) - split.upTo(clip(bucketStart(j)))
	}
	s := l.series(leaf, demand)
	for j := keepFrom; j <= last; j++ {
		if !s.canAdd(j, amount(j), l.nb) {
			return fmt.Errorf("%w: %s of %d GPUs over [%s, %s) for %q: a leaf's bucket holds at most %d GPU-seconds",
				ErrBucketOverflow, what, gpus, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), leaf, int64(maxBucketValue))
		}
	}
	if first < l.floor {
		if lost := split.upTo(clip(bucketStart(l.floor))); lost > 0 {
			l.dropped++
			l.droppedSeconds += lost
		}
	}
	for j := keepFrom; j <= last; j++ {
		if v := amount(j); v > 0 {
			l.writeBucket(leaf, j, v, demand)
		}
	}
	return nil
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
