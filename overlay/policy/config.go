package policy

import (
	"errors"
	"fmt"
	"math"
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
//
// The `hcl` tags are the keys of the server config's policy {} block (and of
// `allot sim -config`): the hcl package decodes that block straight into a
// Config, on top of the defaults, so each setting is declared here once.
// Fields without a tag are not file settings. The groups are embedded, so
// c.Protected reads c.BandsConfig.Protected.
type Config struct {
	// contract.Config holds runtime_cap: RuntimeCap bounds every protected
	// window. contract.Parse clamps min_runtime to it and the policy clamps
	// again in case the cap was lowered since, so both read this one value
	// (pass c.Config to contract.Parse).
	contract.Config
	// Lookback is the fair-share window. Decide does not read it: the caller
	// sums the ledger over [now-Lookback, now) into the FairShare it passes.
	Lookback time.Duration `hcl:"lookback,optional"`

	BandsConfig       `hcl:"bands,block"`
	MarginsConfig     `hcl:"margins,block"`
	ReservationConfig `hcl:"reservation,block"`
	BoundsConfig      `hcl:"bounds,block"`
	DrainConfig       `hcl:"drain,block"`

	// ResumeLoss is the work a resumable job is taken to lose when it is
	// stopped (what it ran since its last checkpoint); time slicing picks
	// the victims that throw the least work away (doc.go, rule 5).
	ResumeLoss time.Duration
	// SliceLossMaxWait bounds MaxSliceLoss in time: B waits for a cheaper
	// stop only while one is in sight (a protected window ending gives it
	// room) and at most this long; it paces rotation and never protects a
	// job past its window for longer. The default is the
	// default RuntimeCap (8h): no job waits for a cheaper victim longer
	// than the longest window anyone may be promised. In the 30-day
	// example 10m to 1h let the bound lapse so often that the work redone
	// rose from 95k to 130k-205k GPU hours.
	SliceLossMaxWait time.Duration
	// SliceLossDoubling paces the bound when no cheaper stop is in sight:
	// it doubles every SliceLossDoubling the job has waited, so a stop
	// throwing away 2^k times the GPU-time the job is promised waits k ×
	// SliceLossDoubling for room that comes without a stop (bound.go,
	// lapseAt), never longer than SliceLossMaxWait. 0: the bound lapses at
	// once when nothing cheaper is in sight.
	SliceLossDoubling time.Duration
	// VictimHold bounds how long a victim is held a preemption gap below
	// the job it made room for when that job never places (0: no hold).
	VictimHold time.Duration
	// Settle: a stop or evaluation issued less than Settle ago is taken as
	// under way, and not issued again, while the caller's view does not
	// show it yet (0: no memory of issued actions).
	Settle time.Duration
	// QuickWindow and QuickGPUs shape the debug-shaped jobs examined for
	// time slicing past the first MaxEvaluations (doc.go, rule 5b): jobs
	// asking at most QuickGPUs GPUs in all with a protected window of at
	// most QuickWindow. At most MaxEvaluations more of them per decision.
	// QuickWindow 0 turns the pass off.
	QuickWindow time.Duration
	QuickGPUs   int

	// Namespaces and NodePools limit the jobs allot manages (empty: all).
	// They are the server config's nomad {} block's.
	Namespaces []string
	NodePools  []string
}

// BandsConfig is the bands {} block (docs/design.md, "How allot drives Nomad").
type BandsConfig struct {
	Protected   int   `hcl:"protected,optional"`   // allocated jobs inside their protected window
	Running     int   `hcl:"running,optional"`     // allocated jobs past their window, or placed in part
	Pending     Range `hcl:"pending,optional"`     // waiting allocated jobs, in fair-share order
	Unallocated Range `hcl:"unallocated,optional"` // free work, running or waiting
	// PreemptionGap is Nomad's: a job preempts only allocations at least this
	// far below it (docs/nomad-facts.md b).
	PreemptionGap int `hcl:"preemption_gap,optional"`
}

// MarginsConfig is the margins {} block.
type MarginsConfig struct {
	// FairnessMargin: a running job past its window is a victim for a
	// pending job only when served(victim leaf) >= served(pending leaf) +
	// margin, where served = usage share / effective share and margin is
	// FairnessMargin when the pending job begins to wait, shrinking
	// linearly to 0 as it waits out its own protected window. The
	// default 0.20 (was 0.10) is what the 30-day example supports (doc.go,
	// rule 5).
	FairnessMargin float64 `hcl:"fairness,optional"`
	// Hysteresis: a pending job inside the pending band keeps its priority
	// while it is less than this far from its target level and the pending
	// order is kept (doc.go, rule 3).
	Hysteresis int `hcl:"hysteresis,optional"`
	// MaxSliceLoss bounds the work one time-slicing stop may throw away:
	// the victims freeing an ask of g GPUs for job B lose at most
	// MaxSliceLoss × g × max(min(B's protected window, RuntimeCap),
	// ResumeLoss) GPU-time,
	// until B has waited SliceLossMaxWait (doc.go, rule 5). 0 sets no bound.
	MaxSliceLoss float64 `hcl:"max_slice_loss,optional"`
}

// ReservationConfig is the reservation {} block.
type ReservationConfig struct {
	// MaxReservations bounds the reservations held at once.
	MaxReservations int `hcl:"max,optional"`
	// ReservationNodes bounds the nodes of one reservation (N).
	ReservationNodes int `hcl:"nodes,optional"`
	// ReservationMaxAge bounds how long one reservation is held (M).
	ReservationMaxAge time.Duration `hcl:"max_age,optional"`
	// GatherNodes bounds the nodes of a gathering reservation, held for a
	// starved gang of more than ReservationNodes allocations that asks for
	// more than half the nodes that could host it (reserve.go, gathers);
	// 0, the default, holds none. Measured on the suite it lets gangs as
	// wide as the cluster start, at a cost in occupancy (doc.go, gathers).
	GatherNodes int `hcl:"gather_nodes,optional"`
}

// ReservationAge bounds how long a reservation of nodes nodes is held:
// ReservationMaxAge; a gathering reservation (more than ReservationNodes
// nodes, reserve.go) RuntimeCap longer. Its nodes take no new work, so
// every protected window on them ends within RuntimeCap; past that it
// expires at once unless rule 5 frees its nodes (hold).
func (c Config) ReservationAge(nodes int) time.Duration {
	if nodes > c.ReservationNodes {
		return c.ReservationMaxAge + c.RuntimeCap
	}
	return c.ReservationMaxAge
}

// BoundsConfig is the bounds {} block.
type BoundsConfig struct {
	// MaxEvaluations bounds the pending jobs evaluated per decision, and the
	// non-fitting jobs considered for time slicing.
	MaxEvaluations int `hcl:"max_evaluations,optional"`
}

// DrainConfig is the drain {} block.
type DrainConfig struct {
	// DrainLead: under a Nomad drain with a deadline, batch jobs are stopped
	// at least this long before the deadline.
	DrainLead time.Duration `hcl:"lead,optional"`
	// DrainReturnAfter: a drained node healthy again for this long returns to
	// service. Zero means only an operator returns it (the file's
	// return = "manual").
	DrainReturnAfter time.Duration `hcl:"return,optional"`
}

// DefaultConfig is the configuration of docs/design.md for Nomad's default
// job_max_priority of 100.
func DefaultConfig() Config { return ConfigForMaxPriority(100) }

// ConfigForMaxPriority places the bands for a cluster whose
// job_max_priority is max (>= 100): running at max-10, protected one
// preemption gap less one above it (max-1, so that no job Nomad places at
// protected can preempt the running band: bandProblems), the pending band
// widened up to just under running, unallocated at 10-29.
func ConfigForMaxPriority(max int) Config {
	return Config{
		Config:   contract.Config{RuntimeCap: contract.DefaultRuntimeCap, MaxNotice: contract.DefaultMaxNotice},
		Lookback: 7 * 24 * time.Hour,
		BandsConfig: BandsConfig{
			Protected:     max - 1,
			Running:       max - 10,
			Pending:       Range{40, max - 11},
			Unallocated:   Range{10, 29},
			PreemptionGap: 10,
		},
		MarginsConfig:     MarginsConfig{FairnessMargin: 0.20, Hysteresis: 3, MaxSliceLoss: 1},
		ReservationConfig: ReservationConfig{MaxReservations: 1, ReservationNodes: 4, ReservationMaxAge: 2 * time.Hour},
		BoundsConfig:      BoundsConfig{MaxEvaluations: 16},
		DrainConfig:       DrainConfig{DrainLead: time.Minute, DrainReturnAfter: 30 * time.Minute},
		ResumeLoss:        15 * time.Minute,
		SliceLossMaxWait:  contract.DefaultRuntimeCap,
		SliceLossDoubling: time.Minute,
		VictimHold:        10 * time.Minute,
		Settle:            30 * time.Second,
		QuickWindow:       30 * time.Minute,
		QuickGPUs:         8,
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid policy config")

// maxNomadPriority is the largest job_max_priority a Nomad server accepts
// (its agent config allows 100 to 32766): no band can sit above it.
const maxNomadPriority = 32766

// FieldError is one problem with a Config. Fields are the Go fields it
// concerns, the one to change first (e.g. "Pending", "Unallocated"); the
// hcl package turns them into the file position of the key that set them.
// Message names the settings by their config file keys and says what
// would be valid.
type FieldError struct {
	Fields  []string
	Message string
}

func (e *FieldError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Message }

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

// String is "[low, high]", as the config file writes a range.
func (r Range) String() string { return fmt.Sprintf("[%d, %d]", r.Low, r.High) }

// Validate reports every problem (each a *FieldError), each saying what
// would be valid. It is the one check of the settings: the server config
// and `allot sim -config` reach the policy only through it.
func (c Config) Validate() error {
	var errs []error
	for _, p := range c.Problems() {
		errs = append(errs, &p)
	}
	return errors.Join(errs...)
}

// Problems lists what Validate reports, in field order.
func (c Config) Problems() []FieldError {
	var out []FieldError
	bad := func(fields []string, format string, args ...any) {
		out = append(out, FieldError{Fields: fields, Message: fmt.Sprintf(format, args...)})
	}
	f := func(names ...string) []string { return names }
	if c.RuntimeCap <= 0 {
		bad(f("RuntimeCap"), "runtime_cap = %v: want a positive duration such as \"8h\"", c.RuntimeCap)
	}
	if c.MaxNotice <= 0 || c.MaxNotice > c.RuntimeCap {
		bad(f("MaxNotice"), "max_checkpoint_notice = %v: want a positive duration at most runtime_cap (%v), such as \"10m\"", c.MaxNotice, c.RuntimeCap)
	}
	if c.Lookback <= 0 {
		bad(f("Lookback"), "lookback = %v: want a positive duration such as \"7d\"", c.Lookback)
	}
	c.bandProblems(bad)
	if !(c.FairnessMargin >= 0) || math.IsInf(c.FairnessMargin, 0) {
		bad(f("FairnessMargin"), "fairness = %v: want a finite number >= 0", c.FairnessMargin)
	}
	if c.Hysteresis < 1 || c.Hysteresis > 100 {
		bad(f("Hysteresis"), "hysteresis = %d: want a whole number from 1 to 100 (1 rewrites on every level change)", c.Hysteresis)
	}
	if !(c.MaxSliceLoss >= 0) || math.IsInf(c.MaxSliceLoss, 0) {
		bad(f("MaxSliceLoss"), "max_slice_loss = %v: want a finite number >= 0 (0 sets no bound)", c.MaxSliceLoss)
	}
	if c.MaxReservations < 0 || c.MaxReservations > 1000 {
		bad(f("MaxReservations"), "max = %d: want a whole number from 0 to 1000 (0 holds none)", c.MaxReservations)
	}
	if c.ReservationNodes < 1 || c.ReservationNodes > 10000 {
		bad(f("ReservationNodes"), "nodes = %d: want a whole number from 1 to 10000", c.ReservationNodes)
	}
	if c.GatherNodes < 0 || c.GatherNodes > 100000 {
		bad(f("GatherNodes"), "gather_nodes = %d: want a whole number from 0 to 100000 (0 holds no gathering reservation)", c.GatherNodes)
	}
	if c.ReservationMaxAge <= 0 {
		bad(f("ReservationMaxAge"), "max_age = %v: want a positive duration such as \"2h\"", c.ReservationMaxAge)
	}
	if c.MaxEvaluations < 1 || c.MaxEvaluations > 1_000_000 {
		bad(f("MaxEvaluations"), "max_evaluations = %d: want a whole number from 1 to 1000000", c.MaxEvaluations)
	}
	if c.DrainLead < 0 {
		bad(f("DrainLead"), "lead = %v: want a duration >= 0", c.DrainLead)
	}
	if c.DrainReturnAfter < 0 {
		bad(f("DrainReturnAfter"), "return = %v: want a duration >= 0 (0: \"manual\")", c.DrainReturnAfter)
	}
	if c.SliceLossDoubling < 0 {
		bad(f("SliceLossDoubling"), "SliceLossDoubling (%v) must be >= 0", c.SliceLossDoubling)
	}
	if c.ResumeLoss < 0 || c.SliceLossMaxWait < 0 {
		bad(f("ResumeLoss", "SliceLossMaxWait"), "ResumeLoss (%v) and SliceLossMaxWait (%v) must be >= 0", c.ResumeLoss, c.SliceLossMaxWait)
	}
	if c.QuickWindow < 0 || c.QuickGPUs < 0 {
		bad(f("QuickWindow", "QuickGPUs"), "QuickWindow (%v) and QuickGPUs (%d) must be >= 0 (a window of 0 turns the quick pass off)", c.QuickWindow, c.QuickGPUs)
	}
	if c.VictimHold < 0 || c.Settle < 0 {
		bad(f("VictimHold", "Settle"), "VictimHold (%v) and Settle (%v) must be >= 0 (0 turns each off)", c.VictimHold, c.Settle)
	}
	return out
}

// bandProblems: each band a non-empty range of Nomad priorities, from
// unallocated (lowest) to protected (highest) without overlap, and pending
// at least preemption_gap above unallocated, so that Nomad evicts free
// work for allocated work.
func (c Config) bandProblems(bad func([]string, string, ...any)) {
	if c.PreemptionGap < 1 || c.PreemptionGap > 100 {
		bad([]string{"PreemptionGap"}, "preemption_gap = %d: want a whole number from 1 to 100 (Nomad's is 10)", c.PreemptionGap)
	}
	if c.Unallocated.Low < 1 || c.Unallocated.High < c.Unallocated.Low {
		bad([]string{"Unallocated"}, "unallocated = %v: want [low, high] with 1 <= low <= high, e.g. [10, 29]", c.Unallocated)
	}
	if c.Pending.Low < 1 || c.Pending.High < c.Pending.Low {
		bad([]string{"Pending"}, "pending = %v: want [low, high] with 1 <= low <= high, e.g. [40, 89]", c.Pending)
	} else if c.Pending.Low-c.Unallocated.High < c.PreemptionGap {
		what := "sits too close to"
		if c.Pending.Low <= c.Unallocated.High {
			what = "overlaps"
		}
		bad([]string{"Pending", "Unallocated", "PreemptionGap"},
			"pending = %v %s unallocated = %v: pending's low must be at least preemption_gap (%d) above unallocated's high (%d), so that Nomad evicts unallocated work for it",
			c.Pending, what, c.Unallocated, c.PreemptionGap, c.Unallocated.High)
	}
	if c.Running <= c.Pending.High {
		bad([]string{"Running", "Pending"}, "running = %d must be above pending's high %d", c.Running, c.Pending.High)
	}
	if c.Protected <= c.Running {
		bad([]string{"Protected", "Running"}, "protected = %d must be above running = %d", c.Protected, c.Running)
	} else if c.PreemptionGap >= 1 && c.Protected-c.Running >= c.PreemptionGap {
		// Nomad places a job at its priority whenever it places it again (a
		// write it makes by replacing an allocation, a reschedule, a drain's
		// migration): at protected, that placement would preempt jobs of the
		// running band by Nomad's heuristics, which only allot may stop.
		bad([]string{"Protected", "Running", "PreemptionGap"},
			"protected = %d is preemption_gap (%d) or more above running = %d: a job Nomad places at protected (restarted by a job update, rescheduled, or migrated off a drained node) would preempt jobs of the running band, which only allot may stop; want protected from %d to %d",
			c.Protected, c.PreemptionGap, c.Running, c.Running+1, c.Running+c.PreemptionGap-1)
	}
	if c.Protected > maxNomadPriority {
		bad([]string{"Protected"}, "protected = %d: want at most %d, the largest job_max_priority Nomad accepts", c.Protected, maxNomadPriority)
	}
}
