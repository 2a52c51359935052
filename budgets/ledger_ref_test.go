package budgets

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// refLedger is the obviously-correct model of Ledger: a map per leaf and
// quantity from bucket index to value, summed by scanning.
type refLedger struct {
	bucketSec, span int64
	head, floor     int64
	written         bool
	vals            map[string]*[2]map[int64]int64 // [charged, demand]
	dropped         int64
	droppedSec      int64
}

func newRefLedger(bucket, retention time.Duration) *refLedger {
	bs := int64(bucket / time.Second)
	return &refLedger{
		bucketSec: bs,
		span:      int64(math.Ceil(retention.Seconds() / float64(bs))),
		floor:     math.MinInt64,
		vals:      map[string]*[2]map[int64]int64{},
	}
}

func (r *refLedger) bucketOf(t time.Time) int64 {
	s := t.Unix()
	q := s / r.bucketSec
	if s < 0 && s%r.bucketSec != 0 {
		q-- // round toward minus infinity
	}
	return q
}

// startsFrom returns the first bucket whose start time is >= t.
func (r *refLedger) startsFrom(t time.Time) int64 {
	j := r.bucketOf(t)
	for !time.Unix(j*r.bucketSec, 0).After(t) && !time.Unix(j*r.bucketSec, 0).Equal(t) {
		j++
	}
	return j
}

func (r *refLedger) write(leaf string, at time.Time, v int64, q int) error {
	if v < 0 {
		return ErrNegativeAmount
	}
	if v == 0 {
		return nil
	}
	j := r.bucketOf(at)
	if j < r.floor {
		r.dropped++
		r.droppedSec += v
		return nil
	}
	if m := r.vals[leaf]; v+r.get(m, q, j) > math.MaxUint32 {
		return ErrBucketOverflow
	}
	if !r.written || j > r.head {
		r.head, r.written = j, true
		r.floor = max(r.floor, j-r.span+1)
	}
	m := r.vals[leaf]
	if m == nil {
		m = &[2]map[int64]int64{{}, {}}
		r.vals[leaf] = m
	}
	m[q][j] += v
	return nil
}

func (r *refLedger) get(m *[2]map[int64]int64, q int, j int64) int64 {
	if m == nil || j < r.floor {
		return 0
	}
	return m[q][j]
}

func (r *refLedger) sum(leaf string, from, to time.Time, q int) int64 {
	m := r.vals[leaf]
	if m == nil {
		return 0
	}
	var s int64
	for j, v := range m[q] {
		start := time.Unix(j*r.bucketSec, 0)
		if j >= r.floor && !start.Before(from) && start.Before(to) {
			s += v
		}
	}
	return s
}

func (r *refLedger) prune(before time.Time) {
	r.floor = max(r.floor, r.startsFrom(before))
}

func (r *refLedger) leaves() []string {
	var out []string
	for p, m := range r.vals {
		for q := range 2 {
			for j, v := range m[q] {
				if j >= r.floor && v > 0 {
					out = append(out, p)
					goto next
				}
			}
		}
	next:
	}
	slices.Sort(out)
	return out
}

// compareLedgers checks every observable of l against r for the given
// leaves and windows, returning the first difference.
func compareLedgers(l *Ledger, r *refLedger, leaves []string, windows [][2]time.Time) error {
	if l.Dropped() != r.dropped || l.DroppedGPUSeconds() != r.droppedSec {
		return fmt.Errorf("dropped = %d (%d s), want %d (%d s)", l.Dropped(), l.DroppedGPUSeconds(), r.dropped, r.droppedSec)
	}
	if got, want := l.Leaves(), r.leaves(); !slices.Equal(got, want) {
		return fmt.Errorf("Leaves() = %q, want %q", got, want)
	}
	for _, leaf := range leaves {
		for _, w := range windows {
			if got, want := l.Usage(leaf, w[0], w[1]), r.sum(leaf, w[0], w[1], 0); got != want {
				return fmt.Errorf("Usage(%s, %v, %v) = %d, want %d", leaf, w[0].Unix(), w[1].Unix(), got, want)
			}
			if got, want := l.Demand(leaf, w[0], w[1]), r.sum(leaf, w[0], w[1], 1); got != want {
				return fmt.Errorf("Demand(%s, %v, %v) = %d, want %d", leaf, w[0].Unix(), w[1].Unix(), got, want)
			}
		}
	}
	return nil
}

// sameError reports whether a Ledger error matches the reference's sentinel.
func sameError(got, want error) bool {
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

// writeSpan models ChargeSpan for whole-second times: every second of
// [start, end) adds gpus to its bucket; buckets before the horizon are
// dropped (one counted drop), buckets the span pushes out of retention are
// not stored, and any overflow rejects the whole span.
func (r *refLedger) writeSpan(leaf string, start, end time.Time, gpus int64, q int) error {
	if gpus < 0 {
		return ErrNegativeAmount
	}
	perBucket := map[int64]int64{}
	var last int64 = math.MinInt64
	for sec := start; sec.Before(end); sec = sec.Add(time.Second) {
		j := r.bucketOf(sec)
		perBucket[j] += gpus
		last = max(last, j)
	}
	var lost int64
	keep := map[int64]int64{}
	for j, v := range perBucket {
		switch {
		case v == 0:
		case j < r.floor:
			lost += v
		case j > last-r.span:
			if v+r.get(r.vals[leaf], q, j) > math.MaxUint32 {
				return ErrBucketOverflow
			}
			keep[j] = v
		}
	}
	if lost > 0 {
		r.dropped++
		r.droppedSec += lost
	}
	js := slices.Sorted(maps.Keys(keep))
	for _, j := range js {
		if err := r.write(leaf, time.Unix(j*r.bucketSec, 0), keep[j], q); err != nil {
			return err
		}
	}
	return nil
}
