package nvml

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/allot-sched/allot/nvplugin/faults"
)

// fakeMachines are go-nvml's own mock DGX systems, by the name `fake` uses.
var fakeMachines = map[string]func() *server.Server{
	"dgxa100": dgxa100.New,
	"dgxh100": dgxh100.New,
	"dgxh200": dgxh200.New,
	"dgxb200": dgxb200.New,
}

// dgxBuses are the PCI buses of the eight GPUs of a DGX H100, so fake bus IDs
// look like a real machine's (and not like the host bridge at 00:00.0).
var dgxBuses = []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

// Telemetry of an idle fake GPU, in NVML's units. The values are typical of an
// idle H100 SXM: ~70 W draw of a 700 W limit, mid-30s °C.
const (
	fakeIdlePowerMW  = 70_000
	fakePowerLimitMW = 700_000
	fakeBAR1Bytes    = 128 << 30
	fakeMaxGraphics  = 1980
	fakeMaxMemory    = 2619
	fakeBaseTempC    = 34
	// fakeBootEnergyMJ is the energy counter at plugin start (as if the driver
	// had been up a while); a simulated reset restarts it from zero, which the
	// health tracker reads as "the GPU was reset".
	fakeBootEnergyMJ = 1 << 40
)

// fakeMachine is a go-nvml mock server with health, telemetry and events wired
// to fault state read from a state directory.
type fakeMachine struct {
	srv      *server.Server
	stateDir string
	now      func() time.Time
	started  time.Time // XIDs injected before this are history, as NVML never replays events

	mu        sync.Mutex
	state     map[string]faults.State
	delivered map[string]int       // XIDs of state[uuid].XIDs already delivered
	resetAt   map[string]time.Time // last simulated reset (or start)
	resets    map[string]int
	energy0   map[string]uint64 // energy counter at resetAt
	watched   map[string]bool   // GPUs registered on an event set
}

// FakeUUID derives the UUID of fake GPU index from the seed, so each simulated
// host (seed) has its own, stable UUIDs.
func FakeUUID(seed, machine string, index int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("allot-nvml/%s/%s/%d", seed, machine, index)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Fake returns a Driver serving go-nvml's mock machine `machine` ("dgxh100",
// ...), with UUIDs derived from seed and faults read from stateDir ("" = none).
// now is the clock of the fake's counters.
func Fake(machine, seed, stateDir string, now func() time.Time) (*Driver, error) {
	mk, ok := fakeMachines[machine]
	if !ok {
		return nil, fmt.Errorf("fake machine %q: want one of dgxa100, dgxh100, dgxh200, dgxb200", machine)
	}
	f := &fakeMachine{
		srv: mk(), stateDir: stateDir, now: now,
		state: map[string]faults.State{}, delivered: map[string]int{}, resetAt: map[string]time.Time{},
		resets: map[string]int{}, energy0: map[string]uint64{}, watched: map[string]bool{},
	}
	start := now()
	f.started = start
	for i, d := range f.srv.Devices {
		dev := d.(*server.Device)
		dev.UUID = FakeUUID(seed, machine, i)
		dev.PciBusID = fmt.Sprintf("0000:%02x:00.0", dgxBuses[i%len(dgxBuses)])
		f.resetAt[dev.UUID] = start
		f.energy0[dev.UUID] = fakeBootEnergyMJ
		f.wire(dev)
	}
	f.srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) {
		return &mock.EventSet{WaitFunc: f.wait, FreeFunc: func() gonvml.Return { return gonvml.SUCCESS }}, gonvml.SUCCESS
	}
	return &Driver{lib: f.srv, fake: f, handles: map[string]gonvml.Device{}}, nil
}

// refresh reloads the fault state of every GPU; a simulated reset (a changed
// reset count) restarts the GPU's volatile counters.
func (f *fakeMachine) refresh() {
	if f.stateDir == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.srv.Devices {
		uuid := d.(*server.Device).UUID
		s, err := faults.Load(f.stateDir, uuid)
		if err != nil {
			continue // a half-written or foreign file: keep the last good state
		}
		if s.Resets != f.resets[uuid] {
			f.resets[uuid] = s.Resets
			f.resetAt[uuid] = f.now()
			f.energy0[uuid] = 0
			f.delivered[uuid] = 0
		}
		f.state[uuid] = s
	}
}

func (f *fakeMachine) get(uuid string) faults.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state[uuid]
}

// wire fills the mock functions go-nvml leaves unset (they panic when called)
// with an idle GPU's values and the injected faults.
func (f *fakeMachine) wire(dev *server.Device) {
	uuid, idx := dev.UUID, dev.Index
	lost := func() bool { return f.get(uuid).Lost }
	dev.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
		p := gonvml.PciInfo{PciDeviceId: dev.Config.PciDeviceId, Bus: uint32(dgxBuses[idx%len(dgxBuses)])}
		// NVML's own form: 8-digit domain, upper-case hex, NUL-padded.
		for i, c := range fmt.Sprintf("00000000:%02X:00.0", p.Bus) {
			p.BusId[i] = int8(c)
		}
		return p, gonvml.SUCCESS
	}
	dev.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		if lost() {
			return gonvml.Memory{}, gonvml.ERROR_GPU_IS_LOST
		}
		return gonvml.Memory{Total: dev.MemoryInfo.Total, Free: dev.MemoryInfo.Total}, gonvml.SUCCESS
	}
	u32 := func(v uint32) func() (uint32, gonvml.Return) {
		return func() (uint32, gonvml.Return) {
			if lost() {
				return 0, gonvml.ERROR_GPU_IS_LOST
			}
			return v, gonvml.SUCCESS
		}
	}
	dev.GetPowerManagementLimitFunc = u32(fakePowerLimitMW)
	dev.GetPowerUsageFunc = u32(fakeIdlePowerMW + uint32(idx)*1000)
	dev.GetBAR1MemoryInfoFunc = func() (gonvml.BAR1Memory, gonvml.Return) {
		if lost() {
			return gonvml.BAR1Memory{}, gonvml.ERROR_GPU_IS_LOST
		}
		return gonvml.BAR1Memory{Bar1Total: fakeBAR1Bytes, Bar1Free: fakeBAR1Bytes}, gonvml.SUCCESS
	}
	dev.GetMaxClockInfoFunc = func(c gonvml.ClockType) (uint32, gonvml.Return) {
		if c == gonvml.CLOCK_MEM {
			return u32(fakeMaxMemory)()
		}
		return u32(fakeMaxGraphics)()
	}
	dev.GetMaxPcieLinkGenerationFunc = func() (int, gonvml.Return) { return 5, gonvml.SUCCESS }
	dev.GetMaxPcieLinkWidthFunc = func() (int, gonvml.Return) { return 16, gonvml.SUCCESS }
	dev.GetPersistenceModeFunc = func() (gonvml.EnableState, gonvml.Return) { return gonvml.FEATURE_ENABLED, gonvml.SUCCESS }
	dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		if lost() {
			return gonvml.Utilization{}, gonvml.ERROR_GPU_IS_LOST
		}
		return gonvml.Utilization{}, gonvml.SUCCESS
	}
	dev.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) {
		return u32(fakeBaseTempC + uint32(idx))()
	}
	f.wireHealth(dev)
}

func (f *fakeMachine) wireHealth(dev *server.Device) {
	uuid := dev.UUID
	dev.GetTotalEccErrorsFunc = func(t gonvml.MemoryErrorType, _ gonvml.EccCounterType) (uint64, gonvml.Return) {
		s := f.get(uuid)
		switch {
		case s.Lost:
			return 0, gonvml.ERROR_GPU_IS_LOST
		case t == gonvml.MEMORY_ERROR_TYPE_UNCORRECTED:
			return s.UncorrectedECC, gonvml.SUCCESS
		}
		return 0, gonvml.SUCCESS
	}
	dev.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) {
		s := f.get(uuid)
		if s.Lost {
			return 0, 0, false, false, gonvml.ERROR_GPU_IS_LOST
		}
		unc := 0
		if s.RowRemapPending || s.RowRemapFailure {
			unc = 1
		}
		return 0, unc, s.RowRemapPending, s.RowRemapFailure, gonvml.SUCCESS
	}
	dev.GetRetiredPagesPendingStatusFunc = func() (gonvml.EnableState, gonvml.Return) {
		s := f.get(uuid)
		switch {
		case s.Lost:
			return gonvml.FEATURE_DISABLED, gonvml.ERROR_GPU_IS_LOST
		case s.RetiredPagesPending:
			return gonvml.FEATURE_ENABLED, gonvml.SUCCESS
		}
		return gonvml.FEATURE_DISABLED, gonvml.SUCCESS
	}
	dev.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) {
		if f.get(uuid).Lost {
			return 0, gonvml.ERROR_GPU_IS_LOST
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		ms := uint64(f.now().Sub(f.resetAt[uuid]).Milliseconds())
		// W × ms = mJ.
		return f.energy0[uuid] + ms*uint64(fakeIdlePowerMW/1000), gonvml.SUCCESS
	}
	dev.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) {
		return gonvml.EventTypeXidCriticalError | gonvml.EventTypeDoubleBitEccError | gonvml.EventTypeSingleBitEccError, gonvml.SUCCESS
	}
	dev.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.watched[uuid] = true
		return gonvml.SUCCESS
	}
}

// fakePollInterval is how often a waiting fake event set rereads the state dir.
const fakePollInterval = 100 * time.Millisecond

// wait delivers injected XIDs in order, once each, like nvmlEventSetWait.
func (f *fakeMachine) wait(timeoutMs uint32) (gonvml.EventData, gonvml.Return) {
	deadline := f.now().Add(time.Duration(timeoutMs) * time.Millisecond)
	for {
		f.refresh()
		if ev, ok := f.next(); ok {
			return ev, gonvml.SUCCESS
		}
		left := deadline.Sub(f.now())
		if left <= 0 {
			return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
		}
		time.Sleep(min(left, fakePollInterval))
	}
}

func (f *fakeMachine) next() (gonvml.EventData, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.srv.Devices {
		uuid := d.(*server.Device).UUID
		s := f.state[uuid]
		if !f.watched[uuid] || f.delivered[uuid] >= len(s.XIDs) {
			continue
		}
		x := s.XIDs[f.delivered[uuid]]
		f.delivered[uuid]++
		if x.At.Before(f.started) {
			continue
		}
		return gonvml.EventData{
			Device: d, EventType: gonvml.EventTypeXidCriticalError, EventData: x.XID,
			GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF,
		}, true
	}
	return gonvml.EventData{}, false
}
