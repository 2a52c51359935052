package policy

import (
	"errors"
	"fmt"
	"time"

	"github.com/allot-sched/allot/overlay/contract"
)

// Range is an inclusive range of Nomad priorities.
type Range struct{ Low, High int }

// Levels is the number of distinct priorities in r.
func (r Range) Levels() int { return r.High - r.Low + 1 }

func (r Range) contains(p int) bool { return p >= r.Low && p <= r.High }

// Config holds every knob of the policy. DefaultConfig gives docs/design.md's
// defaults; Validate says what is wrong with a hand-made one.
type Config struct {
	// Bands (docs/design.md, "How allot drives Nomad").
	Protected   int   // allocated jobs inside their protected window
	Running     int   // allocated jobs past their window, or placed in part
	Pending     Range // waiting allocated jobs, in fair-share order
	Unallocated Range // free work, running or waiting
	// PreemptionGap is Nomad's: a job preempts only allocations at least this
	// far below it (docs/nomad-facts.md b).
	PreemptionGap int

	// FairnessMargin: a running job past its window is a victim for a
	// pending job only when served(victim leaf) >= served(pending leaf) +
	// FairnessMargin, where served = usage share / effective share. The
	// default 0.20 (was 0.10) is what the 30-day example supports (doc.go,
	// rule 5).
	FairnessMargin float64
	// ResumeLoss is the work a resumable job is taken to lose when it is
	// stopped (what it ran since its last checkpoint); time slicing picks
	// the victims that throw the least work away (doc.go, rule 5).
	ResumeLoss time.Duration
	// MaxSliceLoss bounds the work one time-slicing stop may throw away:
	// the victims freeing an ask of g GPUs for job B lose at most
	// MaxSliceLoss × g × min(B's protected window, RuntimeCap) GPU-time,
	// until B has waited SliceLossMaxWait (doc.go, rule 5). 0 sets no bound.
	MaxSliceLoss float64
	// SliceLossMaxWait bounds MaxSliceLoss in time: B waits for a cheaper
	// stop only while one is in sight (a protected window ending gives it
	// room) and at most this long; it paces rotation and never protects a
	// job past its window for longer. The default is the
	// default RuntimeCap (8h): no job waits for a cheaper victim longer
	// than the longest window anyone may be promised. In the 30-day
	// example 10m to 1h let the bound lapse so often that the work redone
	// rose from 95k to 130k-205k GPU hours.
	SliceLossMaxWait time.Duration
	// Hysteresis: a pending job inside the pending band keeps its priority
	// while it is less than this far from its target level and the pending
	// order is kept (doc.go, rule 3).
	Hysteresis int
	// VictimHold bounds how long a victim is held a preemption gap below
	// the job it made room for when that job never places (0: no hold).
	VictimHold time.Duration
	// Settle: a stop or evaluation issued less than Settle ago is taken as
	// under way, and not issued again, while the caller's view does not
	// show it yet (0: no memory of issued actions).
	Settle time.Duration
	// RuntimeCap bounds every protected window (contracts are clamped when
	// parsed; the policy clamps again in case the cap was lowered since).
	RuntimeCap time.Duration
	// MaxNotice caps checkpoint_notice (policy { max_checkpoint_notice }):
	// the contract is parsed against it, and the policy clamps again in
	// case it was lowered since (notice.go).
	MaxNotice time.Duration
	// Lookback is the fair-share window. Decide does not read it: the caller
	// sums the ledger over [now-Lookback, now) into the FairShare it passes.
	Lookback time.Duration

	// MaxEvaluations bounds the pending jobs evaluated per decision, and the
	// non-fitting jobs considered for time slicing.
	MaxEvaluations int
	// MaxReservations bounds the reservations held at once.
	MaxReservations int
	// ReservationNodes bounds the nodes of one reservation (N).
	ReservationNodes int
	// ReservationMaxAge bounds how long one reservation is held (M).
	ReservationMaxAge time.Duration

	// DrainReturnAfter: a drained node healthy again for this long returns to
	// service. Zero means only an operator returns it (manual policy).
	DrainReturnAfter time.Duration
	// DrainLead: under a Nomad drain with a deadline, batch jobs are stopped
	// at least this long before the deadline.
	DrainLead time.Duration

	// Namespaces and NodePools limit the jobs allot manages (empty: all).
	Namespaces []string
	NodePools  []string
}

// DefaultConfig is the configuration of docs/design.md for Nomad's default
// job_max_priority of 100.
func DefaultConfig() Config { return ConfigForMaxPriority(100) }

// ConfigForMaxPriority places the bands for a cluster whose
// job_max_priority is max (>= 100): protected at max, running 10 below, the
// pending band widened up to just under running, unallocated at 10-29.
func ConfigForMaxPriority(max int) Config {
	return Config{
		Protected:         max,
		Running:           max - 10,
		Pending:           Range{40, max - 11},
		Unallocated:       Range{10, 29},
		PreemptionGap:     10,
		FairnessMargin:    0.20,
		ResumeLoss:        15 * time.Minute,
		MaxSliceLoss:      1,
		SliceLossMaxWait:  8 * time.Hour,
		Hysteresis:        3,
		VictimHold:        10 * time.Minute,
		Settle:            30 * time.Second,
		RuntimeCap:        8 * time.Hour,
		MaxNotice:         10 * time.Minute,
		Lookback:          7 * 24 * time.Hour,
		MaxEvaluations:    16,
		MaxReservations:   1,
		ReservationNodes:  4,
		ReservationMaxAge: 2 * time.Hour,
		DrainReturnAfter:  30 * time.Minute,
		DrainLead:         time.Minute,
	}
}

// Contract is the contract configuration these settings imply: the one
// runtime_cap and max_checkpoint_notice the contract is parsed against.
func (c Config) Contract() contract.Config {
	return contract.Config{RuntimeCap: c.RuntimeCap, MaxNotice: c.MaxNotice}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid policy config")

// Validate reports every problem, each saying what would be valid.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	if c.PreemptionGap < 1 {
		bad("preemption gap %d must be at least 1 (Nomad's is 10)", c.PreemptionGap)
	}
	if c.Unallocated.Low < 1 || c.Unallocated.High < c.Unallocated.Low {
		bad("unallocated band %d-%d must be a non-empty range of priorities >= 1", c.Unallocated.Low, c.Unallocated.High)
	}
	if c.Pending.High < c.Pending.Low {
		bad("pending band %d-%d must be a non-empty range", c.Pending.Low, c.Pending.High)
	}
	if c.Pending.Low-c.Unallocated.High < c.PreemptionGap {
		bad("pending band low %d must be at least the preemption gap %d above the unallocated band high %d, so Nomad evicts unallocated work for it",
			c.Pending.Low, c.PreemptionGap, c.Unallocated.High)
	}
	if c.Running <= c.Pending.High {
		bad("running priority %d must be above the pending band high %d", c.Running, c.Pending.High)
	}
	if c.Protected <= c.Running {
		bad("protected priority %d must be above the running priority %d", c.Protected, c.Running)
	}
	if c.FairnessMargin < 0 {
		bad("fairness margin %v must be >= 0", c.FairnessMargin)
	}
	if c.Hysteresis < 1 {
		bad("hysteresis %d must be >= 1 (1 rewrites on every level change)", c.Hysteresis)
	}
	if c.ResumeLoss < 0 || c.SliceLossMaxWait < 0 {
		bad("resume loss (%v) and slice loss max wait (%v) must be >= 0", c.ResumeLoss, c.SliceLossMaxWait)
	}
	if c.VictimHold < 0 || c.Settle < 0 {
		bad("victim hold (%v) and settle time (%v) must be >= 0 (0 turns each off)", c.VictimHold, c.Settle)
	}
	if c.RuntimeCap <= 0 {
		bad("runtime cap %v must be positive", c.RuntimeCap)
	}
	if c.MaxNotice <= 0 || c.MaxNotice > c.RuntimeCap {
		bad("max checkpoint notice %v must be positive and at most the runtime cap %v", c.MaxNotice, c.RuntimeCap)
	}
	if c.MaxEvaluations < 1 || c.MaxReservations < 0 || c.ReservationNodes < 1 || c.ReservationMaxAge <= 0 {
		bad("max evaluations (%d) and reservation nodes (%d) must be >= 1, max reservations (%d) >= 0, reservation max age (%v) positive",
			c.MaxEvaluations, c.ReservationNodes, c.MaxReservations, c.ReservationMaxAge)
	}
	if c.DrainReturnAfter < 0 || c.DrainLead < 0 {
		bad("drain return-after (%v) and drain lead (%v) must be >= 0", c.DrainReturnAfter, c.DrainLead)
	}
	return errors.Join(errs...)
}
