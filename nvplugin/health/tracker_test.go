package health

import (
	"testing"
	"time"
)

func u64(v uint64) *uint64 { return &v }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// step is one input to the tracker: an observation or an XID event.
type step struct {
	obs  *Observation
	xid  uint64
	init string
}

func TestTrackerStateMachine(t *testing.T) {
	healthy := Observation{UncorrectedECC: u64(0), EnergyMJ: u64(1000)}
	tests := []struct {
		name     string
		policy   Policy
		steps    []step
		wantOK   bool
		wantDesc string
	}{
		{
			name:   "a fresh GPU with clean readings is healthy",
			policy: Policy{IgnoredXIDs: DefaultIgnoredXIDs, CheckECC: true, CheckRowRemap: true},
			steps:  []step{{obs: &healthy}},
			wantOK: true,
		},
		{
			name:     "a critical XID marks it unhealthy with what and when",
			policy:   Policy{IgnoredXIDs: DefaultIgnoredXIDs},
			steps:    []step{{obs: &healthy}, {xid: 79}},
			wantDesc: "XID 79 (GPU has fallen off the bus) at 2026-11-30T12:00:01Z",
		},
		{
			name:   "an ignored application XID leaves it healthy",
			policy: Policy{IgnoredXIDs: DefaultIgnoredXIDs},
			steps:  []step{{obs: &healthy}, {xid: 13}, {xid: 31}, {xid: 43}},
			wantOK: true,
		},
		{
			name:     "an overridden ignore list makes XID 13 critical",
			policy:   Policy{IgnoredXIDs: []uint64{31}},
			steps:    []step{{xid: 13}},
			wantDesc: "XID 13 (graphics engine exception) at 2026-11-30T12:00:00Z",
		},
		{
			name:     "an XID with no known meaning is still critical",
			policy:   Policy{IgnoredXIDs: DefaultIgnoredXIDs},
			steps:    []step{{xid: 999}},
			wantDesc: "XID 999 at 2026-11-30T12:00:00Z",
		},
		{
			name:     "an XID is sticky while readings stay clean",
			policy:   Policy{IgnoredXIDs: DefaultIgnoredXIDs},
			steps:    []step{{obs: &healthy}, {xid: 48}, {obs: &Observation{UncorrectedECC: u64(0), EnergyMJ: u64(2000)}}},
			wantDesc: "XID 48 (double-bit ECC error) at 2026-11-30T12:00:01Z",
		},
		{
			name:     "the first XID is kept so the description stays stable",
			policy:   Policy{},
			steps:    []step{{xid: 79}, {xid: 94}},
			wantDesc: "XID 79 (GPU has fallen off the bus) at 2026-11-30T12:00:00Z",
		},
		{
			name:   "a falling energy counter means a reset and clears the XID",
			policy: Policy{},
			steps:  []step{{obs: &healthy}, {xid: 79}, {obs: &Observation{UncorrectedECC: u64(0), EnergyMJ: u64(10)}}},
			wantOK: true,
		},
		{
			name:   "answering again after being lost means a reset",
			policy: Policy{},
			steps:  []step{{obs: &healthy}, {xid: 79}, {obs: &Observation{Lost: true}}, {obs: &Observation{EnergyMJ: u64(5000)}}},
			wantOK: true,
		},
		{
			name:     "a lost GPU is unhealthy while lost",
			policy:   Policy{},
			steps:    []step{{obs: &healthy}, {obs: &Observation{Lost: true}}},
			wantDesc: "GPU is lost (NVML: GPU is lost) at 2026-11-30T12:00:01Z",
		},
		{
			name:     "a rise in uncorrectable ECC is sticky",
			policy:   Policy{CheckECC: true},
			steps:    []step{{obs: &healthy}, {obs: &Observation{UncorrectedECC: u64(2), EnergyMJ: u64(1500)}}, {obs: &Observation{UncorrectedECC: u64(2), EnergyMJ: u64(1800)}}},
			wantDesc: "uncorrectable ECC error at 2026-11-30T12:00:01Z",
		},
		{
			name:   "the ECC check can be turned off",
			policy: Policy{CheckECC: false},
			steps:  []step{{obs: &healthy}, {obs: &Observation{UncorrectedECC: u64(2), EnergyMJ: u64(1500)}}},
			wantOK: true,
		},
		{
			name:   "an ECC counter that goes back to zero means a reset",
			policy: Policy{CheckECC: true},
			steps:  []step{{obs: &healthy}, {obs: &Observation{UncorrectedECC: u64(2), EnergyMJ: u64(1500)}}, {obs: &Observation{UncorrectedECC: u64(0), EnergyMJ: u64(1800)}}},
			wantOK: true,
		},
		{
			name:     "row remap failure and pending are both reported in a fixed order",
			policy:   Policy{CheckRowRemap: true},
			steps:    []step{{obs: &Observation{RowRemapPending: true, RowRemapFailure: true}}},
			wantDesc: "row remapping failure at 2026-11-30T12:00:00Z; row remap pending (GPU reset required) at 2026-11-30T12:00:00Z",
		},
		{
			name:   "a pending row remap recovers when NVML stops reporting it",
			policy: Policy{CheckRowRemap: true},
			steps:  []step{{obs: &Observation{RowRemapPending: true}}, {obs: &healthy}},
			wantOK: true,
		},
		{
			name:   "the row-remap check can be turned off",
			policy: Policy{CheckRowRemap: false},
			steps:  []step{{obs: &Observation{RowRemapFailure: true, RetiredPagesPending: true}}},
			wantOK: true,
		},
		{
			name:     "pending retired pages are unhealthy",
			policy:   Policy{CheckRowRemap: true},
			steps:    []step{{obs: &Observation{RetiredPagesPending: true}}},
			wantDesc: "retired pages pending (GPU reset required) at 2026-11-30T12:00:00Z",
		},
		{
			name:     "an NVML error keeps its first time while it repeats",
			policy:   Policy{},
			steps:    []step{{obs: &Observation{Err: "Unknown Error"}}, {obs: &Observation{Err: "Unknown Error"}}},
			wantDesc: "NVML error: Unknown Error at 2026-11-30T12:00:00Z",
		},
		{
			name:     "an NVML init failure makes every GPU unhealthy",
			policy:   Policy{},
			steps:    []step{{obs: &healthy}, {init: "ERROR_LIBRARY_NOT_FOUND"}},
			wantDesc: "NVML initialisation failed: ERROR_LIBRARY_NOT_FOUND at 2026-11-30T12:00:01Z",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(tc.policy)
			for i, s := range tc.steps {
				now := t0.Add(time.Duration(i) * time.Second)
				switch {
				case s.obs != nil:
					tr.Observe("GPU-1", *s.obs, now)
				case s.init != "":
					tr.InitFailed(s.init, now)
				default:
					tr.XID("GPU-1", s.xid, now)
				}
			}
			got := tr.Status("GPU-1")
			if got.Healthy != tc.wantOK || got.Description != tc.wantDesc {
				t.Errorf("Status = %+v, want Healthy=%v Description=%q", got, tc.wantOK, tc.wantDesc)
			}
		})
	}
}

func TestInitFailureClears(t *testing.T) {
	tr := NewTracker(Policy{})
	tr.InitFailed("boom", t0)
	if tr.Status("GPU-x").Healthy {
		t.Fatal("want unhealthy while init fails")
	}
	tr.InitFailed("", t0)
	if s := tr.Status("GPU-x"); !s.Healthy || s.Description != "" {
		t.Fatalf("after init recovers: %+v", s)
	}
}

func TestForgetDropsSticky(t *testing.T) {
	tr := NewTracker(Policy{})
	tr.XID("GPU-1", 79, t0)
	tr.Forget("GPU-1")
	if !tr.Status("GPU-1").Healthy {
		t.Fatal("forgotten GPU should start clean")
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		xid     uint64
		ignored []uint64
		want    bool
	}{
		{"fallen off the bus is critical", 79, DefaultIgnoredXIDs, true},
		{"double-bit ECC is critical", 48, DefaultIgnoredXIDs, true},
		{"uncontained ECC is critical", 95, DefaultIgnoredXIDs, true},
		{"graphics engine exception is an application error", 13, DefaultIgnoredXIDs, false},
		{"page fault is an application error", 31, DefaultIgnoredXIDs, false},
		{"context switch timeout is an application error", 109, DefaultIgnoredXIDs, false},
		{"an empty ignore list makes every XID critical", 13, nil, true},
		{"an override can ignore XID 79", 79, []uint64{79}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.xid, tc.ignored); got != tc.want {
				t.Errorf("Classify(%d, %v) = %v, want %v", tc.xid, tc.ignored, got, tc.want)
			}
		})
	}
}
