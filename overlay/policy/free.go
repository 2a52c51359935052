package policy

import (
	"math"
	"math/bits"
	"time"
)

// Free work's levels (rule 4, docs/design.md "How allot drives Nomad").
//
// Nomad itself preempts free work for pending allocated jobs, gathering
// victims from the lowest priority up (nomad-facts b, i). Every free job at
// one priority leaves the choice to Nomad's order among equals, which knows
// nothing of the work a stop throws away. So allot gives running free work
// a level by the work it would lose, and Nomad evicts the free work that
// loses least first: the level of a free job whose live allocations all run
// is
//
//	0                                 while c < FreeLevelBase
//	1 + floor(log2(c / FreeLevelBase)) after, at most Levels - 1
//	c = unsaved(now - its last start) × its live allocations
//
// unsaved is the work a stop throws away per GPU: the whole run for a job
// that is not resumable, at most ResumeLoss for a resumable one. A stop of
// one allocation stops the job, so c is the work lost per GPU that the stop
// frees, for a job whose allocations ask alike. Its priority is
// FreeLevels().Low + level. The levels are doubling spans of time, so a
// job's priority is written at most Levels - 1 times per run, never more,
// and never while it starts (a write then replaces a starting allocation,
// tier.go placing). Free work that does not run (waiting, or some
// allocation not running yet) keeps any priority inside FreeLevels, else
// goes to its Low. Free work is never protected by its level: every level
// is at least PreemptionGap below every pending allocated job.

// FreeLevelBase is the run time below which free work sits at its lowest
// level; each level above it doubles (10m, 20m, ... at the defaults, where
// the top of ten levels is 21h20m and more).
const FreeLevelBase = 5 * time.Minute

// FreeLevels is the part of the unallocated band free work is given: its
// top PreemptionGap priorities at most, so that no free job is ever
// PreemptionGap above another and Nomad never preempts free work for free
// work (nomad-facts b). 20-29 at the defaults.
func (b BandsConfig) FreeLevels() Range {
	r := b.Unallocated
	if b.PreemptionGap > 0 {
		r.Low = max(r.Low, r.High-b.PreemptionGap+1)
	}
	return r
}

// unsaved is the work, per GPU, that a stop after running ran throws away:
// all of it for a job that is not resumable, at most ResumeLoss (what it has
// not checkpointed yet) for a resumable one.
func (c *Config) unsaved(ran time.Duration, resumable bool) time.Duration {
	ran = max(ran, 0)
	if resumable {
		ran = min(ran, c.ResumeLoss)
	}
	return ran
}

// freeRun describes the live allocations of one free job for freePriority.
type freeRun struct {
	start   int64 // the latest start among them, in Unix nanoseconds
	allocs  int32 // live allocations
	waiting bool  // some live allocation does not run yet
}

// freePriority is the priority free work with priority cur and live
// allocations r should have at now (Unix nanoseconds).
func (c *Config) freePriority(cur int, r freeRun, resumable bool, now int64) int {
	band := c.FreeLevels()
	if r.allocs == 0 || r.waiting {
		if band.contains(cur) {
			return cur
		}
		return band.Low
	}
	cost := c.unsaved(time.Duration(now-r.start), resumable) * time.Duration(r.allocs)
	level := 0
	if cost >= FreeLevelBase {
		level = bits.Len64(uint64(cost / FreeLevelBase)) // 1 + floor(log2)
	}
	return band.Low + min(level, band.Levels()-1)
}

// freeUntil is freePriority with the time (Unix nanoseconds, after now) at
// which it may next change, math.MaxInt64 when never: a running job's
// level rises when its cost reaches FreeLevelBase << level, unless it is
// at the top level or, resumable, its cost stops at ResumeLoss first.
func (c *Config) freeUntil(cur int, r freeRun, resumable bool, now int64) (int, int64) {
	p := c.freePriority(cur, r, resumable, now)
	band := c.FreeLevels()
	level := p - band.Low
	if r.allocs == 0 || r.waiting || level >= band.Levels()-1 {
		return p, math.MaxInt64
	}
	need := int64(FreeLevelBase) << level                 // cost at which the level rises
	ran := (need + int64(r.allocs) - 1) / int64(r.allocs) // run time that reaches it
	if resumable && ran > int64(c.ResumeLoss) {
		return p, math.MaxInt64 // the cost stops at ResumeLoss × allocations, below need
	}
	return p, r.start + ran
}

// add counts one live allocation of the job.
func (r *freeRun) add(a *Alloc) {
	r.allocs++
	if a.ClientStatus != ClientRunning || a.StartedAt.IsZero() {
		r.waiting = true
	} else if t := a.StartedAt.UnixNano(); t > r.start {
		r.start = t
	}
}
