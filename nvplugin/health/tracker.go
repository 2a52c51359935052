package health

import (
	"sort"
	"strings"
	"time"
)

// Policy selects which checks can make a GPU unhealthy.
type Policy struct {
	// IgnoredXIDs are XIDs that never make a GPU unhealthy (DefaultIgnoredXIDs
	// unless the operator overrides it).
	IgnoredXIDs []uint64
	// CheckECC: a rise in the volatile uncorrectable ECC count marks the GPU
	// unhealthy.
	CheckECC bool
	// CheckRowRemap: a row-remapping failure, a pending row remap, or pending
	// retired pages mark the GPU unhealthy (all three need a GPU reset).
	CheckRowRemap bool
}

// Observation is one poll of a GPU's health-relevant NVML state. Pointers are
// nil when NVML does not support the query on this GPU.
type Observation struct {
	// Lost: NVML answered ERROR_GPU_IS_LOST, or the GPU vanished from enumeration.
	Lost bool
	// Err is another NVML failure while reading the GPU; "" when there was none.
	Err string
	// UncorrectedECC is the volatile (since driver load or GPU reset) count of
	// uncorrectable ECC errors.
	UncorrectedECC *uint64
	// RowRemapPending and RowRemapFailure come from nvmlDeviceGetRemappedRows.
	RowRemapPending, RowRemapFailure bool
	// RetiredPagesPending comes from nvmlDeviceGetRetiredPagesPendingStatus.
	RetiredPagesPending bool
	// EnergyMJ is the energy the GPU used since the driver loaded (or the GPU was
	// reset), in millijoules.
	EnergyMJ *uint64
}

// Status is what the plugin reports for one GPU.
type Status struct {
	Healthy     bool
	Description string
}

// kind orders faults in a description; each kind appears at most once.
type kind int

const (
	kindInit kind = iota
	kindLost
	kindNVML
	kindXID
	kindECC
	kindRemapFailure
	kindRemapPending
	kindRetiredPending
)

type fault struct {
	detail string
	since  time.Time
}

type gpu struct {
	faults     map[kind]fault
	wasLost    bool
	lastECC    *uint64
	lastEnergy *uint64
}

// Tracker holds the health of every GPU the plugin has seen. Health is sticky:
//
//   - Conditions NVML reports on every poll (GPU lost, an NVML error, a pending
//     or failed row remap, pending retired pages, NVML failing to initialise)
//     last exactly as long as NVML keeps reporting them.
//   - Events (a critical XID, a rise in the uncorrectable ECC count) last until
//     the GPU is seen to be reset: it answers again after being lost, or its
//     volatile energy or uncorrectable-ECC counter went down (both restart at a
//     GPU reset or driver reload). A plugin restart also starts clean, since NVML
//     does not replay past events; the checks then run again.
//
// A Tracker is not safe for concurrent use; the caller serialises calls.
type Tracker struct {
	policy  Policy
	gpus    map[string]*gpu
	initErr *fault
}

// NewTracker returns a Tracker that applies p.
func NewTracker(p Policy) *Tracker {
	return &Tracker{policy: p, gpus: map[string]*gpu{}}
}

// SetPolicy replaces the policy; faults already recorded stay.
func (t *Tracker) SetPolicy(p Policy) { t.policy = p }

// InitFailed records that NVML could not be initialised, which makes every
// known GPU unhealthy; InitFailed with err == "" clears it.
func (t *Tracker) InitFailed(err string, now time.Time) {
	switch {
	case err == "":
		t.initErr = nil
	case t.initErr == nil || t.initErr.detail != err:
		t.initErr = &fault{detail: "NVML initialisation failed: " + err, since: now}
	}
}

func (t *Tracker) gpu(uuid string) *gpu {
	g, ok := t.gpus[uuid]
	if !ok {
		g = &gpu{faults: map[kind]fault{}}
		t.gpus[uuid] = g
	}
	return g
}

// Observe applies one poll of GPU uuid taken at now.
func (t *Tracker) Observe(uuid string, o Observation, now time.Time) {
	g := t.gpu(uuid)
	if wasReset(g, o) {
		delete(g.faults, kindXID)
		delete(g.faults, kindECC)
	}
	g.condition(kindLost, o.Lost, "GPU is lost (NVML: GPU is lost)", now)
	g.condition(kindNVML, o.Err != "", "NVML error: "+o.Err, now)
	remap := t.policy.CheckRowRemap
	g.condition(kindRemapFailure, remap && o.RowRemapFailure, "row remapping failure", now)
	g.condition(kindRemapPending, remap && o.RowRemapPending, "row remap pending (GPU reset required)", now)
	g.condition(kindRetiredPending, remap && o.RetiredPagesPending, "retired pages pending (GPU reset required)", now)
	if t.policy.CheckECC && o.UncorrectedECC != nil && g.lastECC != nil && *o.UncorrectedECC > *g.lastECC {
		g.event(kindECC, "uncorrectable ECC error", now)
	}
	if o.UncorrectedECC != nil {
		g.lastECC = o.UncorrectedECC
	}
	if o.EnergyMJ != nil {
		g.lastEnergy = o.EnergyMJ
	}
	g.wasLost = o.Lost
}

// wasReset reports whether o shows that the GPU was reset since the last poll.
func wasReset(g *gpu, o Observation) bool {
	if g.wasLost && !o.Lost && o.Err == "" {
		return true
	}
	if o.EnergyMJ != nil && g.lastEnergy != nil && *o.EnergyMJ < *g.lastEnergy {
		return true
	}
	return o.UncorrectedECC != nil && g.lastECC != nil && *o.UncorrectedECC < *g.lastECC
}

// XID applies an XID event for GPU uuid received at now and reports whether it
// was critical under the policy.
func (t *Tracker) XID(uuid string, xid uint64, now time.Time) bool {
	if !Classify(xid, t.policy.IgnoredXIDs) {
		return false
	}
	t.gpu(uuid).event(kindXID, describeXID(xid), now)
	return true
}

// Forget drops everything known about GPU uuid.
func (t *Tracker) Forget(uuid string) { delete(t.gpus, uuid) }

// Status returns the health of GPU uuid. A GPU never observed is healthy unless
// NVML failed to initialise.
func (t *Tracker) Status(uuid string) Status {
	var parts []string
	if t.initErr != nil {
		parts = append(parts, render(*t.initErr))
	}
	if g, ok := t.gpus[uuid]; ok {
		kinds := make([]int, 0, len(g.faults))
		for k := range g.faults {
			kinds = append(kinds, int(k))
		}
		sort.Ints(kinds)
		for _, k := range kinds {
			parts = append(parts, render(g.faults[kind(k)]))
		}
	}
	return Status{Healthy: len(parts) == 0, Description: strings.Join(parts, "; ")}
}

func render(f fault) string {
	return f.detail + " at " + f.since.UTC().Format(time.RFC3339)
}

// condition sets or clears a fault that lasts as long as NVML reports it. A
// fault already present keeps its original time, so descriptions stay stable.
func (g *gpu) condition(k kind, present bool, detail string, now time.Time) {
	if !present {
		delete(g.faults, k)
		return
	}
	if f, ok := g.faults[k]; ok && f.detail == detail {
		return
	}
	g.faults[k] = fault{detail: detail, since: now}
}

// event records a sticky fault; the first one of a kind is kept until a reset.
func (g *gpu) event(k kind, detail string, now time.Time) {
	if _, ok := g.faults[k]; !ok {
		g.faults[k] = fault{detail: detail, since: now}
	}
}
